import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { RunPlan } from './run-plan.js';

/**
 * A run's receipt: what berth planned for its container, what was observed of it at its start,
 * and every difference as a violation. Pure: the observing is the launcher's (launch/docker/observe.ts),
 * the recording the runner's. Everything observed is bounded here, since part of it comes from
 * inside the tenant's own container.
 */

export const RECEIPT_MOUNTS_MAX = 64;
const Name = z.string().max(64);

export const SeenMountSchema = z.object({ target: z.string().max(512), read_only: z.boolean() }).strict();
export type SeenMount = z.infer<typeof SeenMountSchema>;

export const NAMESPACES = ['pid', 'ipc', 'net', 'mnt', 'uts'] as const;
const Namespace = z.enum(['own', 'host']);

/** The container's boundary, as planned or as seen: the same shape, so a difference is one field. */
export const BoundarySchema = z
  .object({
    runtime: Name.describe('The OCI runtime: runc (the host kernel), runsc (gVisor), or a pod on a cluster.'),
    seccomp: z.enum(['filter', 'strict', 'off']).describe('The seccomp mode of its first process.'),
    capabilities: z
      .object({ effective: z.array(Name).max(64), bounding: z.array(Name).max(64) })
      .strict()
      .describe('Linux capabilities, by name; planned: none.'),
    no_new_privs: z.boolean(),
    namespaces: z.object({ pid: Namespace, ipc: Namespace, net: Namespace, mnt: Namespace, uts: Namespace }).strict(),
    read_only_root: z.boolean(),
    mounts: z
      .array(SeenMountSchema)
      .max(RECEIPT_MOUNTS_MAX)
      .describe("What the tenant sees mounted (the engine's /proc, /sys, /dev and /etc/hosts-style files left out), sorted by target."),
    interfaces: z.array(Name).max(32).describe('Network interfaces in its network namespace; planned: lo alone.'),
    limits: z.object({ memory_bytes: z.number().int(), nano_cpus: z.number().int(), pids: z.number().int() }).strict(),
  })
  .strict();
export type Boundary = z.infer<typeof BoundarySchema>;
export type BoundaryField = keyof Boundary;

/** Where an observed fact was read: the engine's record, the host kernel's /proc of the container's first process, or inside the container. */
export const SOURCES = ['engine', 'host-proc', 'inside'] as const;
export type Source = (typeof SOURCES)[number];

/** What was observed: any field may be missing (it could not be read); each one says where it came from. */
export const ObservedSchema = BoundarySchema.partial()
  .extend({
    // A launcher may read some limits only (a pod's carry memory and CPU; its pids limit is the kubelet's).
    limits: BoundarySchema.shape.limits.partial().optional(),
    seen_from: z.partialRecord(z.enum(Object.keys(BoundarySchema.shape) as [BoundaryField, ...BoundaryField[]]), z.enum(SOURCES)),
  })
  .strict();
export type Observed = z.infer<typeof ObservedSchema>;

/** berth's own side of the boundary: enforced by its proxy and gateway, not by the container (so planned, not observed). */
export const PolicySchema = z
  .object({
    start: z.enum(['cold', 'warm', 'pool']).describe("A new container, the session's warm one, or one pre-started for any tenant."),
    folder: z.enum(['own', 'project']).describe("/workspace is the tenant's own folder, or the whole project (shared mode)."),
    egress: z.boolean().describe("The level may reach hosts through berth's egress proxy."),
    allow: z
      .array(z.string().max(256))
      .max(256)
      .describe(
        "The hosts it may reach through berth's egress proxy: the project's allowlist and its secrets' granted hosts (only with egress).",
      ),
    secrets: z.array(Name).max(64).describe('Secret names berth adds to requests for their hosts (only with egress); never values.'),
  })
  .strict();
export type Policy = z.infer<typeof PolicySchema>;

/** One request berth added a granted secret to (or refused one for), from the run's outbound log: names and where, never a value. */
export const CredentialUseSchema = z
  .object({
    secret: z.string().max(256).describe('The secret names (comma-separated) berth added, or the one it refused.'),
    method: z.string().max(16),
    host: z.string().max(256),
    path: z.string().max(512).describe('The path, without its query.'),
    status: z.number().int().describe('What the agent got back (403, 429, 502 with a note: berth refused or could not send it).'),
    note: z.string().max(300).optional().describe('Why berth refused it, or what failed.'),
  })
  .strict();
export type CredentialUse = z.infer<typeof CredentialUseSchema>;
export const CREDENTIAL_USES_MAX = 50;

export const ReceiptSchema = z
  .object({
    version: z.literal(1),
    planned: BoundarySchema,
    observed: ObservedSchema,
    policy: PolicySchema,
    violations: z.array(z.string().max(600)).max(64).describe('Every way what was observed differs from the plan.'),
    unobserved: z.array(Name).max(16).describe('Planned facts nothing could read (never counted as held).'),
    credential_uses: z
      .array(CredentialUseSchema)
      .max(CREDENTIAL_USES_MAX)
      .optional()
      .describe(
        'Requests berth added a granted secret to during the run (or refused one for), oldest first; absent when the project holds no grant.',
      ),
    more_credential_uses: z.number().int().optional().describe('Such requests past the ones kept.'),
  })
  .strict();
export type Receipt = z.infer<typeof ReceiptSchema>;

/** The engine adds these for every container; they are not the tenant's files. */
const ENGINE_MOUNT = /^\/(proc|sys|dev)(\/|$)|^\/etc\/(hosts|hostname|resolv\.conf)$/;

/** A mount table reduced to what the tenant sees: the root and the engine's own left out, the last mount at a target winning, sorted. */
export function tenantMounts(mounts: readonly SeenMount[]): SeenMount[] {
  const last = new Map<string, SeenMount>();
  for (const m of mounts) if (m.target !== '/' && !ENGINE_MOUNT.test(m.target)) last.set(m.target, m);
  return [...last.values()].sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0)).slice(0, RECEIPT_MOUNTS_MAX);
}

/** What berth asks of every container, from its plan. */
export function plannedBoundary(plan: RunPlan): Boundary {
  return {
    runtime: plan.runtime,
    seccomp: 'filter',
    capabilities: { effective: [], bounding: [] },
    no_new_privs: true,
    namespaces: { pid: 'own', ipc: 'own', net: 'own', mnt: 'own', uts: 'own' },
    read_only_root: plan.readOnlyRootfs,
    mounts: tenantMounts(plan.mounts.map((m) => ({ target: m.target, read_only: m.readOnly }))),
    interfaces: ['lo'],
    limits: { memory_bytes: plan.limits.memoryBytes, nano_cpus: plan.limits.nanoCpus, pids: plan.limits.pids },
  };
}

const shown = (v: unknown) => JSON.stringify(v);

/** The ways one observed field differs from its plan, in words an operator reads. */
function fieldViolations(field: BoundaryField, planned: Boundary, seen: NonNullable<Observed[BoundaryField]>): string[] {
  if (field === 'mounts') {
    const want = new Map(planned.mounts.map((m) => [m.target, m]));
    const got = new Map((seen as SeenMount[]).map((m) => [m.target, m]));
    return [
      ...planned.mounts.flatMap((m) => {
        const g = got.get(m.target);
        if (!g) return [`mount ${m.target} missing (planned ${m.read_only ? 'read-only' : 'writable'})`];
        return g.read_only === m.read_only
          ? []
          : [`mount ${m.target} is ${g.read_only ? 'read-only' : 'writable'} (planned ${m.read_only ? 'read-only' : 'writable'})`];
      }),
      ...[...got.values()]
        .filter((m) => !want.has(m.target))
        .map((m) => `mount ${m.target} not planned (${m.read_only ? 'read-only' : 'writable'})`),
    ];
  }
  if (field === 'capabilities') {
    const caps = seen as Boundary['capabilities'];
    return (['effective', 'bounding'] as const).flatMap((set) => {
      const extra = caps[set].filter((c) => !planned.capabilities[set].includes(c));
      return extra.length ? [`${set} capabilities ${extra.join(', ')} (planned ${planned.capabilities[set].join(', ') || 'none'})`] : [];
    });
  }
  if (field === 'namespaces') {
    const ns = seen as Boundary['namespaces'];
    return NAMESPACES.filter((n) => ns[n] !== planned.namespaces[n]).map((n) => `${n} namespace is the host's (planned its own)`);
  }
  if (field === 'interfaces') {
    const extra = (seen as string[]).filter((i) => !planned.interfaces.includes(i));
    return extra.length ? [`network interfaces ${extra.join(', ')} (planned ${planned.interfaces.join(', ')} alone)`] : [];
  }
  if (field === 'limits') {
    const l = seen as Partial<Boundary['limits']>;
    return (Object.keys(planned.limits) as Array<keyof Boundary['limits']>)
      .filter((k) => l[k] !== undefined && l[k] !== planned.limits[k])
      .map((k) => `limit ${k} ${l[k]} (planned ${planned.limits[k]})`);
  }
  return shown(seen) === shown(planned[field]) ? [] : [`${field} ${shown(seen)} (planned ${shown(planned[field])})`];
}

/** The receipt: every observed field compared with its plan; a field nothing read is listed as unobserved, never as held. */
export function receiptOf(planned: Boundary, observed: Observed, policy: Policy, uses?: { kept: CredentialUse[]; more: number }): Receipt {
  const fields = Object.keys(planned) as BoundaryField[];
  const violations: string[] = [];
  const unobserved: string[] = [];
  for (const field of fields) {
    const seen = observed[field];
    if (seen === undefined) unobserved.push(field);
    else
      violations.push(
        ...fieldViolations(field, planned, seen).map((v) => `${v} [${observed.seen_from[field] ?? 'unknown'}]`.slice(0, 600)),
      );
  }
  return {
    version: 1,
    planned,
    observed,
    policy,
    violations: violations.slice(0, 64),
    unobserved,
    ...(uses ? { credential_uses: uses.kept.slice(0, CREDENTIAL_USES_MAX) } : {}),
    ...(uses && uses.more ? { more_credential_uses: uses.more } : {}),
  };
}

/** The receipt's sha256 over its canonical JSON (keys sorted at every depth): what the audit chain holds. */
export function receiptDigest(receipt: Receipt): string {
  const canonical = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canonical)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
          )
        : v;
  return `sha256:${createHash('sha256')
    .update(JSON.stringify(canonical(receipt)))
    .digest('hex')}`;
}
