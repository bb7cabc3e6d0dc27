import os from 'node:os';
import { z } from 'zod';

/** berth.yaml `runs:`: how many runs at once, how many may wait, how long a shutdown waits for them. */
export const MAX_CONCURRENT_RUNS = 1024;
export const MAX_QUEUED_RUNS = 100_000;
export const DEFAULT_DRAIN_SECONDS = 30;
export const DEFAULT_WARM_IDLE_SECONDS = 300;
/** An idle warm container costs well under 1 MiB (measured); the bound is for the engine's sake. */
export const DEFAULT_WARM_MAX = 200;
/**
 * Warm containers one tenant (a chat user or team, of one project) keeps idle. A tenant opens
 * sessions at will, and an idle one may hold up to the 32 MiB held-memory slack over its ~1 MiB
 * self: 4 bound a tenant to ~132 MiB between messages.
 */
export const DEFAULT_WARM_PER_TENANT = 4;
/**
 * Pre-started containers kept per shape (a project's image, level and limits): a new person's
 * first message claims one. Each waits at the cost of an idle container (README, Speed); at most
 * runs/prestart-pool.ts MAX_SHAPES shapes are kept.
 */
export const DEFAULT_POOL = 2;
/**
 * Pre-started containers per shape while people arrive fast (plan/pool-size.ts): at 10 new people a
 * second and a start of ~0.5-1 s under load, what arrives during one start, with headroom.
 */
export const DEFAULT_POOL_MAX = 16;
/**
 * Container starts the pool's refill has under way at once. Measured on the 2-core VM (docs/benchmarks.md,
 * Bursts): the engine's starts a second rise to 3 at once (2.9 → 4.6 → 5.8) and stay flat past it,
 * while each start only takes longer.
 */
export const DEFAULT_ENGINE_STARTS = 3;

const Count = z.number().int().min(1).max(MAX_CONCURRENT_RUNS);

export const RunsSchema = z
  .object({
    max_concurrent: Count.optional().describe(
      "Runs at once in this berth process (berth serve: the host's runs); default from its cores and memory (4 per core, at most one per 512 MiB, at least 2).",
    ),
    per_project: Count.optional().describe('Runs at once of one project; default max_concurrent.'),
    per_tenant: Count.optional().describe('Runs at once of one tenant (a chat user or team) of a project; default 2.'),
    queue: z
      .number()
      .int()
      .min(0)
      .max(MAX_QUEUED_RUNS)
      .optional()
      .describe(
        'Runs that may wait for a slot (served round-robin across tenants); past it a run is refused with 429 BUSY. Default 25 × max_concurrent; 0 refuses instead of waiting.',
      ),
    drain_seconds: z
      .number()
      .int()
      .min(0)
      .max(3600)
      .default(DEFAULT_DRAIN_SECONDS)
      .describe('On SIGTERM: how long runs in flight may finish before their containers are stopped and the runs recorded as interrupted.'),
    warm_idle_seconds: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .default(DEFAULT_WARM_IDLE_SECONDS)
      .describe(
        "A session's container stays up this long after a message, and the next message is an exec into it; 0: a new container for every message. Only `berth serve` and `berth bridge` keep containers warm.",
      ),
    warm_max: z
      .number()
      .int()
      .min(0)
      .max(10_000)
      .default(DEFAULT_WARM_MAX)
      .describe('Warm containers kept at most; past it the one idle longest is removed.'),
    warm_per_tenant: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .describe(
        `Warm containers one tenant (a chat user or team) of a project keeps, one per session; past it that tenant's own least recently used one is removed, never another tenant's. Default ${DEFAULT_WARM_PER_TENANT}.`,
      ),
    pool: z
      .number()
      .int()
      .min(0)
      .max(64)
      .default(DEFAULT_POOL)
      .describe(
        "Containers started ahead of need for each shape of run (a project's image, level and limits, learnt from its first new session): a new person's first message takes one and has its workspace mounted into it, instead of starting a container. 0: none. Only with warm containers (berth serve, berth bridge), under runc or crun, for isolated workspaces. While new people arrive fast the pool grows past it (up to pool_max), and shrinks back once they stop.",
      ),
    pool_max: z
      .number()
      .int()
      .min(0)
      .max(256)
      .optional()
      .describe(
        `Containers kept per shape at most while new people arrive fast: the pool holds what arrives while one container starts, twice over, and never more than this nor than max_concurrent. Default ${DEFAULT_POOL_MAX} (at least pool).`,
      ),
    engine_starts: z
      .number()
      .int()
      .min(1)
      .max(64)
      .optional()
      .describe(
        `Container starts the pool's refill has under way at once (one at a time while runs wait for a slot). Past what the engine takes at once, each start only gets slower. Default ${DEFAULT_ENGINE_STARTS}.`,
      ),
  })
  .strict()
  .superRefine((runs, ctx) => {
    const max = runs.max_concurrent;
    for (const field of ['per_project', 'per_tenant'] as const) {
      const value = runs[field];
      if (max !== undefined && value !== undefined && value > max)
        ctx.addIssue({ code: 'custom', path: [field], message: `must be at most max_concurrent (${max})` });
    }
    if (runs.pool_max !== undefined && runs.pool_max < runs.pool) {
      ctx.addIssue({ code: 'custom', path: ['pool_max'], message: `must be at least pool (${runs.pool})` });
    }
    if (runs.per_project !== undefined && runs.per_tenant !== undefined && runs.per_tenant > runs.per_project) {
      ctx.addIssue({ code: 'custom', path: ['per_tenant'], message: `must be at most per_project (${runs.per_project})` });
    }
  })
  .prefault({})
  .describe(
    'Admission control: concurrent runs (global, per project, per tenant), the wait queue, the shutdown drain; warm session containers.',
  );

export type RunsSettings = z.output<typeof RunsSchema>;

/** The limits admission applies, all resolved (see admissionLimitsOf). */
export interface AdmissionLimits {
  /** Runs in flight on this host. */
  global: number;
  /** Runs in flight of one project. */
  perProject: number;
  /** Runs in flight of one tenant of a project. */
  perTenant: number;
  /** Runs waiting for a slot; past it, BUSY. */
  queue: number;
}

export interface HostResources {
  cpus: number;
  memoryBytes: number;
}

const MiB = 1024 * 1024;

/** What this host offers (read here, once per call; the defaults below are pure). */
export function hostResources(): HostResources {
  return { cpus: os.availableParallelism(), memoryBytes: os.totalmem() };
}

/**
 * Limits for a host nobody configured. A run is mostly a container waiting on a model (I/O, not
 * CPU), so 4 per core; each holds a container of a few hundred MiB, so at most one per 512 MiB;
 * never fewer than 2 so one stuck run cannot stall the host.
 */
export function defaultAdmissionLimits(host: HostResources): AdmissionLimits {
  const byCpu = Math.max(1, Math.floor(host.cpus)) * 4;
  const byMemory = Math.floor(host.memoryBytes / (512 * MiB));
  const global = Math.min(MAX_CONCURRENT_RUNS, Math.max(2, Math.min(byCpu, byMemory)));
  return { global, perProject: global, perTenant: Math.min(2, global), queue: Math.min(MAX_QUEUED_RUNS, global * 25) };
}

/**
 * berth.yaml's `runs:` over the host's defaults. The schema refuses a per-project or per-tenant
 * limit above an explicit max_concurrent; above a host-derived one it is cut to it (the same
 * berth.yaml must not fail on a smaller host).
 */
export function admissionLimitsOf(config: { runs: RunsSettings }, host: HostResources = hostResources()): AdmissionLimits {
  const defaults = defaultAdmissionLimits(host);
  const { max_concurrent, per_project, per_tenant, queue } = config.runs;
  const global = max_concurrent ?? defaults.global;
  const perProject = Math.min(global, per_project ?? global);
  const perTenant = Math.min(perProject, per_tenant ?? defaults.perTenant);
  return { global, perProject, perTenant, queue: queue ?? Math.min(MAX_QUEUED_RUNS, global * 25) };
}

/**
 * The pre-started pool's size and bounds (runs/prestart-pool.ts), read from the config at each
 * decision. `always` (tests): nothing waits in the background, each claim starts its own.
 */
export function poolBoundsOf(config: () => { runs: RunsSettings }, always = false) {
  return {
    size: () => (always ? 0 : config().runs.pool),
    max: () => Math.max(config().runs.pool, config().runs.pool_max ?? DEFAULT_POOL_MAX),
    global: () => admissionLimitsOf(config()).global,
    engineStarts: () => config().runs.engine_starts ?? DEFAULT_ENGINE_STARTS,
  };
}
