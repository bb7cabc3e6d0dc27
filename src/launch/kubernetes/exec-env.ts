import type { V1Pod } from '@kubernetes/client-node';
import type { RunPlan } from '../../plan/run-plan.js';
import { sentryExec } from '../lifecycle.js';
import { AGENT_CONTAINER, RELAY_ENV } from './objects.js';

/**
 * An exec's argv: the plan's environment over the container's, as a Docker exec's `Env` is (an
 * exec has no environment of its own on Kubernetes). What the pod was started with and this plan
 * does not set is unset (`env -u`: a warm pod's first message set it), except berth-bridge's relay
 * settings, which the exec inherits from the container: the token comes from the run's Secret
 * (secretKeyRef), so it is in no argv, no pod spec and no exec request. Values are argv entries,
 * never parsed by a shell; in a sentry, under berth-bridge's filter. Pure.
 */
export function execArgv(pod: V1Pod, plan: RunPlan, argv: string[]): string[] {
  const relay = new Set<string>(Object.values(RELAY_ENV));
  const started = pod.spec?.containers.find((c) => c.name === AGENT_CONTAINER)?.env ?? [];
  const unset = started.filter((e) => !relay.has(e.name) && !Object.hasOwn(plan.env, e.name)).flatMap((e) => ['-u', e.name]);
  return ['env', ...unset, ...Object.entries(plan.env).map(([k, v]) => `${k}=${v}`), ...sentryExec(plan.runtime, argv)];
}
