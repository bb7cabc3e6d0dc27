import { BerthError } from '../base/errors.js';
import type { RunPlan } from '../plan/run-plan.js';
import type { LauncherCapabilities } from './launcher.js';

/**
 * What a plan needs of its launcher, checked before anything is started: each host-locality
 * assumption is a capability, and a launcher without one is refused in words, never half-used.
 */
export function assertLaunchable(caps: LauncherCapabilities, plan: RunPlan, opts: { loopQuota: boolean }): void {
  if (!caps.runtimes.includes(plan.runtime)) {
    throw new BerthError('RUNTIME_MISSING', `the engine has no runtime "${plan.runtime}" (it offers: ${caps.runtimes.join(', ')})`, {
      hint:
        plan.runtime === 'runsc'
          ? 'install gVisor and register it with the engine (docs/security.md, "Stronger isolation: gVisor"); "berth doctor" checks it'
          : 'register it with the engine, or choose another runtime for the project',
    });
  }
  const need = (what: string) =>
    new BerthError('LAUNCHER_UNSUPPORTED', `this launcher cannot ${what}`, {
      hint: 'run berth beside its engine (a Docker engine on this host), or turn the feature off',
    });
  if (!caps.hostPaths && !caps.clusterVolumes && plan.mounts.some((m) => m.type === 'bind'))
    throw need("bind berth's host paths (workspaces, snapshots, agent homes) into a container");
  if (!caps.unixSockets && plan.sockets.length)
    throw need("reach berth's Unix sockets (model gateway, egress proxy, file tools) from a container");
  if (!caps.loopQuotas && opts.loopQuota) throw need('show a loop-mounted workspace filesystem (disk_quotas: loop)');
}
