# Scenario systemd: cpushield as users install it. Not booted from the initramfs but by
# dev/guest/run-systemd.sh: a Debian bookworm disk running systemd, the .deb installed by
# dpkg and cpushield.service enabled, booted twice; its checks are dev/guest/systemd/test.sh
# (docs/TESTING.md). This file only declares the test.
# guest-test: systemd_unit_shields_at_boot_stop_undoes_exactly_reboot_restores
# guest-runner: run-systemd.sh
# guest-kernels: 6.1
# guest-cost: 190
