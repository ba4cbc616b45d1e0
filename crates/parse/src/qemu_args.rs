//! A QEMU process's arguments (/proc/PID/cmdline, NUL-separated): the name
//! the VM was given with `-name [guest=]NAME[,process=…][,debug-threads=on]`.

/// The VM's name from QEMU's `-name` option, if it has one. QEMU's option
/// syntax doubles a comma that belongs to a value (`a,,b` is `a,b`).
pub fn vm_name(cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let value = loop {
        let arg = args.next()?;
        if arg == "-name" || arg == "--name" {
            break args.next()?;
        }
    };
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                part.push(',');
                continue;
            }
            parts.push(std::mem::take(&mut part));
        } else {
            part.push(c);
        }
    }
    parts.push(part);
    parts
        .iter()
        .enumerate()
        .find_map(|(i, p)| match p.split_once('=') {
            Some(("guest", name)) => Some(name.to_string()),
            None if i == 0 => Some(p.clone()),
            _ => None,
        })
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for a in args {
            out.extend_from_slice(a.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn the_vm_name_is_the_guest_key_or_the_first_bare_value_of_dash_name() {
        let libvirt = argv(&[
            "/usr/bin/qemu-system-x86_64",
            "-name",
            "guest=rt-vm,debug-threads=on",
            "-S",
        ]);
        assert_eq!(vm_name(&libvirt).as_deref(), Some("rt-vm"));
        let bare = argv(&["qemu-system-x86_64", "-name", "lab,debug-threads=on"]);
        assert_eq!(vm_name(&bare).as_deref(), Some("lab"));
        let escaped = argv(&["qemu", "--name", "a,,b,process=x"]);
        assert_eq!(vm_name(&escaped).as_deref(), Some("a,b"));
    }

    #[test]
    fn without_a_name_or_with_only_other_keys_there_is_none() {
        assert_eq!(vm_name(&argv(&["qemu-system-x86_64", "-smp", "2"])), None);
        assert_eq!(vm_name(&argv(&["qemu", "-name"])), None);
        assert_eq!(vm_name(&argv(&["qemu", "-name", "debug-threads=on"])), None);
        assert_eq!(vm_name(b""), None);
    }
}
