# Sourced by bench scripts (not run): sets BIN to the cpushield binary, from
# $CPUSHIELD when given, else from a release build of the current tree.
if [[ -n ${CPUSHIELD:-} ]]; then
    BIN=$CPUSHIELD
else
    cargo build --release -q -p cpushield
    TARGET_DIR=${CARGO_TARGET_DIR:-target}
    case $TARGET_DIR in /*) ;; *) TARGET_DIR="$(pwd)/$TARGET_DIR" ;; esac
    BIN="$TARGET_DIR/release/cpushield"
fi
