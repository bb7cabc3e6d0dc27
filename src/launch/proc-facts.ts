import type { Boundary, SeenMount } from '../plan/receipt.js';
import { unescapeMountPoint } from './mount-check.js';

/**
 * The kernel's words about one process, as /proc writes them (status, mountinfo, net/dev): read
 * by berth from the host's /proc (runc) or from inside a sandbox with its own kernel (gVisor).
 * What comes from inside is the tenant's to shape, so every text is cut to a bound and anything
 * not in the kernel's format is left out, never guessed at.
 */

/** /proc texts past this are not the kernel's (a mount table of a few dozen lines is ~10 KiB). */
export const PROC_TEXT_MAX = 256 * 1024;
const LINES_MAX = 4096;

const linesOf = (text: string) => text.slice(0, PROC_TEXT_MAX).split('\n').slice(0, LINES_MAX);

/** Capability numbers to names (include/uapi/linux/capability.h); a bit past the table is "cap_<n>". */
const CAPABILITIES = [
  'chown',
  'dac_override',
  'dac_read_search',
  'fowner',
  'fsetid',
  'kill',
  'setgid',
  'setuid',
  'setpcap',
  'linux_immutable',
  'net_bind_service',
  'net_broadcast',
  'net_admin',
  'net_raw',
  'ipc_lock',
  'ipc_owner',
  'sys_module',
  'sys_rawio',
  'sys_chroot',
  'sys_ptrace',
  'sys_pacct',
  'sys_admin',
  'sys_boot',
  'sys_nice',
  'sys_resource',
  'sys_time',
  'sys_tty_config',
  'mknod',
  'lease',
  'audit_write',
  'audit_control',
  'setfcap',
  'mac_override',
  'mac_admin',
  'syslog',
  'wake_alarm',
  'block_suspend',
  'audit_read',
  'perfmon',
  'bpf',
  'checkpoint_restore',
];

/** "00000000a80425fb" → ["chown", ...]; undefined when it is not a 64-bit hex mask. */
export function capabilityNames(hex: string): string[] | undefined {
  if (!/^[0-9a-f]{1,16}$/i.test(hex)) return undefined;
  const mask = BigInt(`0x${hex}`);
  const names: string[] = [];
  for (let bit = 0; bit < 64; bit++) if ((mask >> BigInt(bit)) & 1n) names.push(CAPABILITIES[bit] ?? `cap_${bit}`);
  return names;
}

const SECCOMP = { '0': 'off', '1': 'strict', '2': 'filter' } as const;

/** Seccomp, capabilities and no-new-privs from a status text; a field it does not hold (gVisor has no NoNewPrivs) is absent. */
export function statusFacts(text: string): Partial<Pick<Boundary, 'seccomp' | 'capabilities' | 'no_new_privs'>> {
  const fields = new Map<string, string>();
  for (const line of linesOf(text)) {
    const m = /^(Seccomp|CapEff|CapBnd|NoNewPrivs):\s*(\S+)$/.exec(line);
    if (m && !fields.has(m[1]!)) fields.set(m[1]!, m[2]!);
  }
  const seccomp = SECCOMP[fields.get('Seccomp') as keyof typeof SECCOMP];
  const effective = capabilityNames(fields.get('CapEff') ?? '');
  const bounding = capabilityNames(fields.get('CapBnd') ?? '');
  const nnp = fields.get('NoNewPrivs');
  return {
    ...(seccomp ? { seccomp } : {}),
    ...(effective && bounding ? { capabilities: { effective, bounding } } : {}),
    ...(nnp === '0' || nnp === '1' ? { no_new_privs: nnp === '1' } : {}),
  };
}

/** Every mount of a mountinfo text (field 5 its point, field 6 its own options: "ro" or "rw" first). */
export function mountinfoMounts(text: string): SeenMount[] {
  return linesOf(text).flatMap((line) => {
    const f = line.split(' ');
    const target = f[4];
    const opts = f[5]?.split(',')[0];
    if (!target?.startsWith('/') || (opts !== 'ro' && opts !== 'rw')) return [];
    return [{ target: unescapeMountPoint(target).slice(0, 512), read_only: opts === 'ro' }];
  });
}

/** Interface names of a /proc/net/dev text (its two header lines have no "name:"). */
export function netDevInterfaces(text: string): string[] {
  return linesOf(text)
    .flatMap((line) => {
      const m = /^\s*([^\s:]{1,32}):/.exec(line);
      return m ? [m[1]!] : [];
    })
    .slice(0, 32)
    .sort();
}
