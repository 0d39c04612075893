"""The sandbox's seccomp filter: a classic-BPF program assembled here (no libseccomp), handed to bubblewrap.

bubblewrap loads it (`--seccomp FD`, with no_new_privs) in the sandboxed command just before exec, so the kernel,
the cell worker and everything they start run under it; the sandbox's init (bwrap's own pid 1) runs no agent code.

What it denies (EPERM unless said otherwise), i.e. what an analysis never needs:
  * new namespaces: `unshare` (all flags), `setns`, and `clone` whose flags ask for a new namespace
    (NEWNS/NEWCGROUP/NEWUTS/NEWIPC/NEWUSER/PID/NET); `clone3` answers ENOSYS, so libc falls back to `clone` (its
    flags live in memory a filter cannot read);
  * mounts: mount, umount2, pivot_root, chroot and the new mount API (open_tree, move_mount, fsopen, fsconfig,
    fsmount, fspick, mount_setattr);
  * other processes' memory and descriptors: ptrace, process_vm_readv/writev, pidfd_getfd, kcmp;
  * the kernel keyring (keyctl, add_key, request_key), bpf, perf_event_open, userfaultfd, io_uring_*,
    fanotify_init, open_by_handle_at/name_to_handle_at, kexec_*, init/finit/delete_module, syslog, acct,
    swapon/off, reboot, quotactl, clock/time setters, sethostname/setdomainname, iopl/ioperm, personality
    changes are left alone (harmless without the above);
  * `socket(AF_VSOCK, ...)`: the sandbox's network namespace does not cover vsock, and on a VM guest it reaches the
    hypervisor's host (issue 40);
  * every non-native ABI: x32 system calls (number bit 30) and any architecture but x86_64.

Only x86_64 is assembled; elsewhere `program()` returns None and the sandbox runs without the filter (its
`seccomp` attribute says so).
"""
from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

# classic BPF opcodes
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
OFF_NR, OFF_ARCH, OFF_ARG0_LO = 0, 4, 16

CLONE_NEW_MASK = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000)
# NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (NEWTIME is only reachable via unshare/clone3)

SYS_CLONE, SYS_CLONE3 = 56, 435
SYS_SOCKET, AF_VSOCK = 41, 40  # the network namespace does not cover vsock: a VM guest's /dev/vsock reaches the host
DENIED_X86_64: dict[str, int] = {
    # namespaces and mounts
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
    # other processes
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
    # kernel attack surface an analysis never needs
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "syslog": 103, "acct": 163,
    "swapon": 167, "swapoff": 168, "reboot": 169, "quotactl": 179, "quotactl_fd": 443, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "uselib": 134, "vhangup": 153, "lookup_dcookie": 212, "nfsservctl": 180,
    "_sysctl": 156,
}


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def assemble(nrs: list[int], arch: int, deny: int, enosys: int) -> bytes:
    """Arch check, x32 check, clone flag check, socket family check, one JEQ per denied call number, then allow."""
    n = len(nrs)
    head = 8
    i_allow = head + n
    i_clone = i_allow + 1  # ld arg0; jset; ret allow
    i_socket = i_clone + 3  # ld arg0; jeq AF_VSOCK; ret allow
    i_deny = i_socket + 3
    i_enosys = i_deny + 1
    assert i_enosys < 255, "too many denied calls for 8-bit jumps"

    def to(target: int, at: int) -> int:  # a jump's offset counts from the instruction after it
        return target - (at + 1)
    prog = [
        _ins(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
        _ins(BPF_JEQ_K, 1, 0, arch),
        _ins(BPF_RET_K, 0, 0, deny),
        _ins(BPF_LD_W_ABS, 0, 0, OFF_NR),
        _ins(BPF_JGE_K, to(i_deny, 4), 0, X32_SYSCALL_BIT),
        _ins(BPF_JEQ_K, to(i_enosys, 5), 0, SYS_CLONE3),
        _ins(BPF_JEQ_K, to(i_clone, 6), 0, SYS_CLONE),
        _ins(BPF_JEQ_K, to(i_socket, 7), 0, SYS_SOCKET),
    ]
    for j, nr in enumerate(nrs):
        prog.append(_ins(BPF_JEQ_K, to(i_deny, head + j), 0, nr))
    prog += [
        _ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),  # i_allow
        _ins(BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO),  # i_clone
        _ins(BPF_JSET_K, to(i_deny, i_clone + 1), 0, CLONE_NEW_MASK),
        _ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        _ins(BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO),  # i_socket: the address family
        _ins(BPF_JEQ_K, to(i_deny, i_socket + 1), 0, AF_VSOCK),
        _ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        _ins(BPF_RET_K, 0, 0, deny),  # i_deny
        _ins(BPF_RET_K, 0, 0, enosys),  # i_enosys
    ]
    assert len(prog) == i_enosys + 1
    return b"".join(prog)


def program() -> bytes | None:
    """The filter for this machine, or None where no table is assembled (not x86_64)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return assemble(sorted(set(DENIED_X86_64.values())), AUDIT_ARCH_X86_64, SECCOMP_RET_ERRNO | errno.EPERM,
                   SECCOMP_RET_ERRNO | errno.ENOSYS)
