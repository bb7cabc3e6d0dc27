import type { ContainerSettings } from '../../launch/docker/inspect.js';
import type { RunPlan } from '../../plan/run-plan.js';

/** A security option that switches a confinement off (seccomp, AppArmor, SELinux labels, masked /proc paths). */
const UNCONFINED = /^(seccomp|apparmor|label|systempaths)[=:](unconfined|disable)$/;
const NO_NEW_PRIVILEGES = /^no-new-privileges([=:]true)?$/;

/**
 * Every way the engine's record of a container differs from the plan it was created from (and
 * from what berth asks of every container: all capabilities dropped, no new privileges, its own
 * pid and IPC namespaces, its IPC sysctls). Named as `docker inspect` names them; empty: the
 * engine kept the plan.
 */
export function compareEngineSettings(got: ContainerSettings, plan: RunPlan): string[] {
  const diffs: string[] = [];
  const want = (field: keyof ContainerSettings, planned: string | number | boolean) => {
    if (got[field] !== planned) diffs.push(`${field} ${JSON.stringify(got[field])} (planned ${JSON.stringify(planned)})`);
  };
  want('Runtime', plan.runtime);
  want('User', plan.user);
  want('NetworkMode', plan.network);
  want('ReadonlyRootfs', plan.readOnlyRootfs);
  want('Privileged', false);
  want('Memory', plan.limits.memoryBytes);
  want('MemorySwap', plan.limits.memoryBytes); // no swap beyond the memory limit
  want('NanoCpus', plan.limits.nanoCpus);
  want('PidsLimit', plan.limits.pids);
  if (!got.CapDrop.includes('ALL')) diffs.push(`CapDrop ${JSON.stringify(got.CapDrop)} (planned ["ALL"])`);
  if (got.CapAdd.length) diffs.push(`CapAdd ${JSON.stringify(got.CapAdd)} (planned none)`);
  if (!got.SecurityOpt.some((o) => NO_NEW_PRIVILEGES.test(o))) diffs.push('SecurityOpt without no-new-privileges');
  for (const o of got.SecurityOpt.filter((o) => UNCONFINED.test(o))) diffs.push(`SecurityOpt ${o}`);
  if (got.PidMode !== '' && got.PidMode !== 'private') diffs.push(`PidMode ${got.PidMode} (planned its own)`);
  if (got.IpcMode !== 'private' && got.IpcMode !== 'none') diffs.push(`IpcMode ${got.IpcMode} (planned private)`);
  for (const [key, planned] of Object.entries(plan.sysctls)) {
    if (got.Sysctls[key] !== planned) diffs.push(`Sysctls ${key} ${got.Sysctls[key] ?? 'unset'} (planned ${planned})`);
  }
  return diffs;
}
