import fs from 'node:fs';
import os from 'node:os';

/** What berth's side of the host says, to compare with what each container says from inside. */
export interface HostFacts {
  /** The pid namespaces of the host's init and of berth itself, where readable ("pid:[4026531836]"). */
  pidNamespaces: string[];
  ipcNamespaces: string[];
  /** The kernel has AppArmor enabled (/sys/module/apparmor/parameters/enabled = Y). */
  apparmor: boolean;
  /** SELinux is enforcing (/sys/fs/selinux/enforce = 1). */
  selinux: boolean;
  /** The host kernel's release (uname -r): a container under runc answers the same; gVisor or a VM does not. */
  kernel: string;
}

const readlink = (path: string) => {
  try {
    return [fs.readlinkSync(path)];
  } catch {
    return []; // /proc/1 needs root (or the same user); berth's own always reads
  }
};
const read = (path: string) => {
  try {
    return fs.readFileSync(path, 'utf8').trim();
  } catch {
    return '';
  }
};

export function readHostFacts(): HostFacts {
  return {
    pidNamespaces: [...new Set([...readlink('/proc/1/ns/pid'), ...readlink('/proc/self/ns/pid')])],
    ipcNamespaces: [...new Set([...readlink('/proc/1/ns/ipc'), ...readlink('/proc/self/ns/ipc')])],
    apparmor: read('/sys/module/apparmor/parameters/enabled') === 'Y',
    selinux: read('/sys/fs/selinux/enforce') === '1',
    kernel: os.release(),
  };
}
