# The guest kernels: the one place their Debian packages are named. Sourced by the guest
# scripts (fetch-kernel.sh, run.sh, run-systemd.sh, build-initramfs.sh).
#
#   6.1      Debian bookworm's stock kernel (PREEMPT_DYNAMIC booted voluntary; cgroup v1
#            and v2 cpuset; no timerlat or osnoise tracer)
#   6.12-rt  Debian's PREEMPT_RT kernel from bookworm-security (threaded IRQ handlers,
#            rcuc/ktimers threads, timerlat and osnoise tracers; no cgroup v1 cpuset:
#            CONFIG_CPUSETS_V1 is off)
#
# A kernel is chosen with GUEST_KERNEL=NAME (default GUEST_KERNEL_DEFAULT).

GUEST_KERNELS="6.1 6.12-rt"
GUEST_KERNEL_DEFAULT=6.1

# The userland of the tracer tests, packed into the initramfs with its libraries: rtla
# (the kernel's timerlat/osnoise front end), cyclictest (rt-tests: compare's anchor) and
# what they link. Any bookworm version.
GUEST_RTLA_PACKAGES="rtla rt-tests libtracefs1 libtraceevent1 libnuma1 libc6"

# guest_kernel NAME: sets KERNEL_NAME, KERNEL_PACKAGE (one exact package and version for
# apt-get download), KERNEL_RELEASE (its `uname -r`, the name of its files in the
# package). Returns 1, with a line on stderr, for an unknown NAME.
guest_kernel() {
    KERNEL_NAME=$1
    case "$1" in
        6.1)
            KERNEL_PACKAGE="linux-image-6.1.0-50-amd64-unsigned=6.1.176-1"
            KERNEL_RELEASE="6.1.0-50-amd64"
            ;;
        6.12-rt)
            KERNEL_PACKAGE="linux-image-6.12.117+deb12-rt-amd64-unsigned=6.12.117-1~deb12u1"
            KERNEL_RELEASE="6.12.117+deb12-rt-amd64"
            ;;
        *)
            echo "no guest kernel '$1'; GUEST_KERNEL is one of: $GUEST_KERNELS" >&2
            return 1
            ;;
    esac
}
