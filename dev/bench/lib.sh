# Sourced by every dev/bench/*.sh (not run): the one way a bench script takes its
# arguments and finds the cpushield binary.
#
#   source "$(dirname "$0")/lib.sh"       # also cds to the repository root
#   bench_args "SECS=10 ROUNDS=2" "$@"     # sets SECS and ROUNDS
#   bench_bin                              # sets BIN
#
# bench_args SPEC ARGS...
#   SPEC is a space-separated list, in positional order, of
#     NAME=DEFAULT   a non-negative integer: the Nth positional argument, or
#                    --name N / --name=N (NAME lowercased, _ written -)
#     +NAME          a switch: --name sets NAME=1 (default 0)
#     NAME...        the rest of the positional arguments, as the array NAME
#                    (each a non-negative integer); must come last
#   -h/--help prints the usage line and the script's header comment, exit 0.
#   Anything else (an unknown option, a value that is not a non-negative
#   integer, too many arguments) prints one line naming it and the usage line
#   to stderr, exit 1, before the script checks or changes anything.
#
# bench_bin
#   BIN is $CPUSHIELD when set (it must be an executable file), else
#   $CARGO_TARGET_DIR/release/cpushield (default target/), built with
#   `cargo build --release -p cpushield` when it is missing or older than the
#   sources.
#
# bench_die MESSAGE: prints "SCRIPT: MESSAGE" to stderr, exit 1.
# bench_need TOOL...: bench_die naming the first TOOL not on PATH.
# bench_root: bench_die unless running as root.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_NAME="dev/bench/$(basename "$0")"
cd "$BENCH_ROOT"

bench_die() {
    echo "$BENCH_NAME: $*" >&2
    exit 1
}

bench_need() {
    local tool pkg
    for tool in "$@"; do
        case $tool in
            cyclictest | oslat) pkg=rt-tests ;;
            /usr/bin/time) pkg=time ;;
            cc) pkg=gcc ;;
            *) pkg=$tool ;;
        esac
        command -v "$tool" >/dev/null || bench_die "needs $tool: apt-get install $pkg"
    done
}

bench_root() {
    [ "$(id -u)" = 0 ] || bench_die "run as root (SCHED_FIFO, mlock, cpusets, IRQ affinity)"
}

# The usage line of SPEC: "usage: dev/bench/x.sh [SECS=10] [ROUNDS=2] (or --secs N --rounds N)".
_bench_usage() {
    local spec=$1 item name pos="" opt=""
    for item in $spec; do
        case $item in
            +*)
                name=${item#+}
                name=${name,,}
                opt="$opt [--${name//_/-}]"
                ;;
            *...) pos="$pos [${item%...}...]" ;;
            *=*)
                name=${item%%=*}
                pos="$pos [$item]"
                name=${name,,}
                opt="$opt --${name//_/-} N"
                ;;
        esac
    done
    if [ -n "$opt" ]; then
        echo "usage: $BENCH_NAME$pos  (or:$opt)"
    else
        echo "usage: $BENCH_NAME$pos"
    fi
}

_bench_bad() {
    echo "$BENCH_NAME: $1" >&2
    _bench_usage "$2" >&2
    exit 1
}

_bench_is_count() {
    [[ $1 =~ ^[0-9]+$ ]]
}

bench_args() {
    local spec=$1 item name opt value found
    shift
    local -a positional=() names=()
    local rest=""
    # Defaults.
    for item in $spec; do
        case $item in
            +*) printf -v "${item#+}" '%s' 0 ;;
            *...)
                rest=${item%...}
                eval "$rest=()"
                ;;
            *=*)
                name=${item%%=*}
                printf -v "$name" '%s' "${item#*=}"
                names+=("$name")
                ;;
            *) _bench_bad "bench_args: bad SPEC item '$item'" "$spec" ;;
        esac
    done
    while [ $# -gt 0 ]; do
        case $1 in
            -h | --help)
                _bench_usage "$spec"
                sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
                exit 0
                ;;
            --) shift; positional+=("$@"); break ;;
            --*)
                opt=${1#--}
                value=
                if [[ $opt == *=* ]]; then
                    value=${opt#*=}
                    opt=${opt%%=*}
                fi
                found=
                for item in $spec; do
                    case $item in
                        +*)
                            name=${item#+}
                            name=${name,,}
                            if [ "$opt" = "${name//_/-}" ] && [ -z "$value" ]; then
                                printf -v "${item#+}" '%s' 1
                                found=1
                            fi
                            ;;
                        *=*)
                            name=${item%%=*}
                            name=${name,,}
                            if [ "$opt" = "${name//_/-}" ]; then
                                if [ -z "$value" ]; then
                                    [ $# -ge 2 ] || _bench_bad "--$opt needs a value" "$spec"
                                    value=$2
                                    shift
                                fi
                                _bench_is_count "$value" ||
                                    _bench_bad "'$value' for --$opt is not a non-negative integer" "$spec"
                                printf -v "${item%%=*}" '%s' "$value"
                                found=1
                            fi
                            ;;
                    esac
                done
                [ -n "$found" ] || _bench_bad "unknown option '$1'" "$spec"
                shift
                ;;
            -*) _bench_bad "unknown option '$1'" "$spec" ;;
            *) positional+=("$1"); shift ;;
        esac
    done
    local i=0
    for value in "${positional[@]}"; do
        if [ "$i" -lt "${#names[@]}" ]; then
            _bench_is_count "$value" ||
                _bench_bad "'$value' for ${names[$i]} is not a non-negative integer" "$spec"
            printf -v "${names[$i]}" '%s' "$value"
        elif [ -n "$rest" ]; then
            _bench_is_count "$value" ||
                _bench_bad "'$value' for $rest is not a non-negative integer" "$spec"
            eval "$rest+=(\"\$value\")"
        else
            _bench_bad "too many arguments (from '$value')" "$spec"
        fi
        i=$((i + 1))
    done
}

bench_bin() {
    if [ -n "${CPUSHIELD:-}" ]; then
        [ -f "$CPUSHIELD" ] && [ -x "$CPUSHIELD" ] ||
            bench_die "CPUSHIELD=$CPUSHIELD is not an executable file: point it at a built cpushield, or unset it to build one"
        BIN=$CPUSHIELD
        return
    fi
    local target=${CARGO_TARGET_DIR:-target}
    case $target in /*) ;; *) target="$BENCH_ROOT/$target" ;; esac
    BIN="$target/release/cpushield"
    if [ ! -x "$BIN" ] ||
        [ -n "$(find crates Cargo.toml Cargo.lock -newer "$BIN" -print -quit 2>/dev/null)" ]; then
        echo "$BENCH_NAME: building $BIN" >&2
        cargo build --release -q -p cpushield || bench_die "cargo build --release -p cpushield failed"
    fi
}
