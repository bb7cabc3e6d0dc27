import { isBerthError } from '../../base/errors.js';
import type { Launcher, RunOptions } from '../../launch/launcher.js';
import type { ContainerInspector, ContainerSettings } from '../../launch/docker/inspect.js';
import type { RunPlan } from '../../plan/run-plan.js';

/**
 * A launcher that remembers, for every container it creates, the plan it was created from and
 * what the engine then says it holds (its inspect, read the moment it exists: a run's container
 * is removed when the run ends). It changes nothing about how containers are made.
 */
export interface WatchedLauncher {
  launcher: Launcher;
  /** Every container created so far, in order, with the engine's settings once they are read. */
  created(): Promise<Array<{ id: string; plan: RunPlan; engine: ContainerSettings | { error: string } }>>;
}

export function watchLauncher(inner: Launcher, inspector: ContainerInspector): WatchedLauncher {
  const seen: Array<{ id: string; plan: RunPlan; engine: Promise<ContainerSettings | { error: string }> }> = [];
  const watching = (plan: RunPlan, onCreated: RunOptions['onCreated']) => (id: string) => {
    const engine = inspector.inspect(id).catch((err: unknown) => ({ error: isBerthError(err) ? err.message : String(err) }));
    seen.push({ id, plan, engine });
    onCreated?.(id);
  };
  return {
    launcher: {
      ...inner,
      run: (plan, opts = {}) => inner.run(plan, { ...opts, onCreated: watching(plan, opts.onCreated) }),
      startIdle: (plan, keepAlive, opts = {}) => inner.startIdle(plan, keepAlive, { ...opts, onCreated: watching(plan, opts.onCreated) }),
    },
    created: () => Promise.all(seen.map(async (c) => ({ id: c.id, plan: c.plan, engine: await c.engine }))),
  };
}
