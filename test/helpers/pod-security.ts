import type { V1Container, V1PodSpec } from '@kubernetes/client-node';

/**
 * Pod Security Standards, the checks of k8s.io/pod-security-admission (policy/check_*.go, as of
 * Kubernetes 1.29) for the fields a pod spec of berth's can carry. The test API server (1.20) has
 * no PodSecurity admission, so the levels are checked here, on the specs deploy/ and the launcher
 * produce. Returns the violations, each "check: what"; empty: the pod meets the level.
 */

/** check_sysctls.go: the "safe" sysctls baseline allows (1.29: + net.ipv4.ip_local_reserved_ports, 1.29's tcp_keepalive set is newer). */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
]);
/** check_capabilities_baseline.go: what baseline lets a container add. */
const BASELINE_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
/** check_restrictedVolumes.go: the volume types restricted allows. */
const RESTRICTED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];

const containersOf = (spec: V1PodSpec): V1Container[] => [...(spec.initContainers ?? []), ...spec.containers];

export function baselineViolations(spec: V1PodSpec): string[] {
  const out: string[] = [];
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('hostNamespaces: a host namespace');
  for (const c of containersOf(spec)) {
    if (c.securityContext?.privileged) out.push(`privileged: ${c.name}`);
    for (const cap of c.securityContext?.capabilities?.add ?? [])
      if (!BASELINE_CAPS.has(cap)) out.push(`capabilities: ${c.name} adds ${cap}`);
    if ((c.ports ?? []).some((p) => p.hostPort)) out.push(`hostPorts: ${c.name}`);
    if (c.securityContext?.seccompProfile?.type === 'Unconfined') out.push(`seccompProfile_baseline: ${c.name} Unconfined`);
    if (c.securityContext?.procMount && c.securityContext.procMount !== 'Default') out.push(`procMount: ${c.name}`);
  }
  if (spec.securityContext?.seccompProfile?.type === 'Unconfined') out.push('seccompProfile_baseline: pod Unconfined');
  for (const v of spec.volumes ?? []) if (v.hostPath) out.push(`hostPathVolumes: ${v.name}`);
  for (const s of spec.securityContext?.sysctls ?? []) if (!SAFE_SYSCTLS.has(s.name)) out.push(`sysctls: ${s.name}`);
  return out;
}

export function restrictedViolations(spec: V1PodSpec): string[] {
  const out = baselineViolations(spec);
  for (const v of spec.volumes ?? []) {
    const types = Object.keys(v).filter((k) => k !== 'name');
    if (!types.every((t) => RESTRICTED_VOLUMES.includes(t))) out.push(`restrictedVolumes: ${v.name} (${types.join(', ')})`);
  }
  const pod = spec.securityContext ?? {};
  for (const c of containersOf(spec)) {
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false) out.push(`allowPrivilegeEscalation: ${c.name}`);
    if ((sc.runAsNonRoot ?? pod.runAsNonRoot) !== true) out.push(`runAsNonRoot: ${c.name}`);
    if ((sc.runAsUser ?? pod.runAsUser) === 0) out.push(`runAsUser: ${c.name} is 0`);
    const seccomp = (sc.seccompProfile ?? pod.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') out.push(`seccompProfile_restricted: ${c.name}`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`capabilities_restricted: ${c.name} does not drop ALL`);
    for (const cap of sc.capabilities?.add ?? [])
      if (cap !== 'NET_BIND_SERVICE') out.push(`capabilities_restricted: ${c.name} adds ${cap}`);
  }
  return out;
}
