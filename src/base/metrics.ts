import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics (GET /metrics). One registry per createMetrics() — never prom-client's global
 * one — so two berths (or two tests) in one process count apart. Every layer records through the
 * named methods below; nothing else touches prom-client.
 *
 * Cardinality is bounded: labels carry only enums, permission levels and project names. A tenant
 * key, session id, run id or host path is never a label value. Even project names (bounded by the
 * operator) are guarded: a value that is not a short lowercase slug, or a project beyond the first
 * MAX_PROJECTS seen, is counted as OVERFLOW_LABEL.
 */

export type RunKind = 'message' | 'workflow_step' | 'shell_tool';
export type RunOutcome = 'ok' | 'error' | 'timeout' | 'failed' | 'busy' | 'interrupted';
export type DenialSurface = 'http' | 'mcp' | 'gateway';
export type GatewayCallKind = 'model' | 'egress' | 'tools';
export type GatewayCallOutcome = 'allowed' | 'refused' | 'error';
/** injected: the value went into the request; not_granted: a placeholder toward a host, path or method without a grant; rate_limited: past the grant's per-tenant rate; unavailable: the value could not be read. */
export type SecretUseOutcome = 'injected' | 'not_granted' | 'not_allowed' | 'rate_limited' | 'unavailable';

export interface RunLabels {
  project: string;
  level: string;
  kind: RunKind;
  outcome: RunOutcome;
  /** Whether the run reused a warm container. */
  warm: boolean;
}

export interface Metrics {
  /** A run ended (any outcome); counted once per run. */
  runFinished(l: RunLabels): void;
  /** From accepted to started (waiting for a lane or a container slot). */
  observeQueueWait(seconds: number): void;
  /** Creating and starting a container, or attaching to a warm one. */
  observeContainerStart(seconds: number, warm: boolean): void;
  /** The agent's own run time, from start to exit. */
  observeRun(seconds: number): void;
  setQueueDepth(n: number): void;
  setRunsInFlight(n: number): void;
  setWarmContainers(n: number): void;
  setPoolContainers(n: number): void;
  sandboxViolation(project: string): void;
  /** A run's receipt differed from its plan (plan/receipt.ts): once per run, by project. */
  receiptViolation(project: string): void;
  /** A decoy credential was seen (outbound/honeytokens.ts): where (model, egress). */
  honeytokenHit(project: string, where: string): void;
  permissionDenied(surface: DenialSurface): void;
  gatewayCall(l: { kind: GatewayCallKind; outcome: GatewayCallOutcome }): void;
  /** A missing or wrong token; `surface` is a short name ("http", "mcp", "metrics"), never the token. */
  authFailure(surface: string): void;
  /** A request through the egress proxy that a brokered secret went into, or was refused one (by the secret's name, never its value). */
  secretUse(l: { secret: string; outcome: SecretUseOutcome }): void;
  /** A chat reply that no way of sending delivered (the person was told, if even that could be sent), by channel. */
  replyUndelivered(channel: string): void;
  /** The exposition text and its content type, for the HTTP route. */
  render(): Promise<{ contentType: string; body: string }>;
  readonly registry: Registry;
}

export const LABEL_VALUE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const MAX_PROJECTS = 200;
export const OVERFLOW_LABEL = 'other';

/** 5 ms … 10 min: a warm exec is milliseconds, a cold image pull or a long agent run is minutes. */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** A label's values: kept while they look like a slug and fewer than `max` are known, else OVERFLOW_LABEL. */
export function labelGuard(max: number): (value: string) => string {
  const kept = new Set<string>();
  return (value) => {
    if (!LABEL_VALUE_PATTERN.test(value)) return OVERFLOW_LABEL;
    if (kept.has(value)) return value;
    if (kept.size >= max) return OVERFLOW_LABEL;
    kept.add(value);
    return value;
  };
}

/** Metrics must never fail a run: a value that is not a finite, non-negative number is dropped. */
const valid = (n: number) => Number.isFinite(n) && n >= 0;

export function createMetrics(opts: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'berth_' });
  const project = labelGuard(MAX_PROJECTS);
  const level = labelGuard(16);
  const surface = labelGuard(16);
  const channel = labelGuard(32);

  const runs = new Counter({
    name: 'berth_runs_total',
    help: 'Runs ended, by project, permission level, kind, outcome and whether the container was warm.',
    labelNames: ['project', 'level', 'kind', 'outcome', 'warm'] as const,
    registers,
  });
  const queueWait = new Histogram({
    name: 'berth_run_queue_wait_seconds',
    help: 'Time a run waited between being accepted and starting.',
    buckets: DURATION_BUCKETS,
    registers,
  });
  const containerStart = new Histogram({
    name: 'berth_container_start_seconds',
    help: 'Time to create and start a container (warm="true": reuse a kept one).',
    labelNames: ['warm'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const runDuration = new Histogram({
    name: 'berth_run_duration_seconds',
    help: "Time an agent ran, from its container's start to its exit.",
    buckets: DURATION_BUCKETS,
    registers,
  });
  const queueDepth = new Gauge({ name: 'berth_run_queue_depth', help: 'Runs accepted and waiting to start.', registers });
  const inFlight = new Gauge({ name: 'berth_runs_in_flight', help: 'Runs started and not yet ended.', registers });
  const warmContainers = new Gauge({ name: 'berth_warm_containers', help: 'Containers kept warm between messages.', registers });
  const poolContainers = new Gauge({
    name: 'berth_pool_containers',
    help: "Containers started ahead of need, waiting for a new session's first message (runs.pool).",
    registers,
  });
  const violations = new Counter({
    name: 'berth_sandbox_violations_total',
    help: 'Paths refused by the path sandbox (E_SANDBOX_VIOLATION), by project.',
    labelNames: ['project'] as const,
    registers,
  });
  const receiptViolations = new Counter({
    name: 'berth_receipt_violations_total',
    help: "Runs whose container, observed at its start, differed from berth's plan (their receipt's violations), by project.",
    labelNames: ['project'] as const,
    registers,
  });
  const honeytokenHits = new Counter({
    name: 'berth_honeytoken_hits_total',
    help: "Requests that carried one of a tenant's decoy credentials (the tenant is frozen), by project and where berth saw it.",
    labelNames: ['project', 'where'] as const,
    registers,
  });
  const denials = new Counter({
    name: 'berth_permission_denials_total',
    help: 'Requests refused by a permission decision, by surface.',
    labelNames: ['surface'] as const,
    registers,
  });
  const gatewayCalls = new Counter({
    name: 'berth_gateway_calls_total',
    help: 'Calls through the gateways (model, egress, tools), by outcome.',
    labelNames: ['kind', 'outcome'] as const,
    registers,
  });
  const authFailures = new Counter({
    name: 'berth_auth_failures_total',
    help: 'Requests with a missing or wrong token, by surface.',
    labelNames: ['surface'] as const,
    registers,
  });
  const undelivered = new Counter({
    name: 'berth_undelivered_replies_total',
    help: 'Chat replies that could not be delivered by any way the channel has (message, plain text, file), by channel.',
    labelNames: ['channel'] as const,
    registers,
  });
  const secretUses = new Counter({
    name: 'berth_secret_requests_total',
    help: 'Requests through the egress proxy a brokered secret was added to (injected) or refused for, by secret name.',
    labelNames: ['secret', 'outcome'] as const,
    registers,
  });

  return {
    registry,
    runFinished: (l) =>
      runs.inc({ project: project(l.project), level: level(l.level), kind: l.kind, outcome: l.outcome, warm: String(l.warm) }),
    observeQueueWait: (s) => {
      if (valid(s)) queueWait.observe(s);
    },
    observeContainerStart: (s, warm) => {
      if (valid(s)) containerStart.observe({ warm: String(warm) }, s);
    },
    observeRun: (s) => {
      if (valid(s)) runDuration.observe(s);
    },
    setQueueDepth: (n) => {
      if (valid(n)) queueDepth.set(n);
    },
    setRunsInFlight: (n) => {
      if (valid(n)) inFlight.set(n);
    },
    setWarmContainers: (n) => {
      if (valid(n)) warmContainers.set(n);
    },
    setPoolContainers: (n) => {
      if (valid(n)) poolContainers.set(n);
    },
    sandboxViolation: (p) => violations.inc({ project: project(p) }),
    receiptViolation: (p) => receiptViolations.inc({ project: project(p) }),
    honeytokenHit: (p, where) => honeytokenHits.inc({ project: project(p), where: where === 'model' ? 'model' : 'egress' }),
    permissionDenied: (s) => denials.inc({ surface: s }),
    gatewayCall: (l) => gatewayCalls.inc({ kind: l.kind, outcome: l.outcome }),
    authFailure: (s) => authFailures.inc({ surface: surface(s) }),
    secretUse: (l) => secretUses.inc({ secret: l.secret, outcome: l.outcome }),
    replyUndelivered: (c) => undelivered.inc({ channel: channel(c) }),
    render: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
  };
}

/** For code paths built without a registry: every method does nothing, render() is empty. */
export function noMetrics(): Metrics {
  const registry = new Registry();
  const nothing = () => undefined;
  return {
    registry,
    runFinished: nothing,
    observeQueueWait: nothing,
    honeytokenHit: nothing,
    observeContainerStart: nothing,
    observeRun: nothing,
    setQueueDepth: nothing,
    setRunsInFlight: nothing,
    setWarmContainers: nothing,
    setPoolContainers: nothing,
    sandboxViolation: nothing,
    receiptViolation: nothing,
    permissionDenied: nothing,
    gatewayCall: nothing,
    authFailure: nothing,
    secretUse: nothing,
    replyUndelivered: nothing,
    render: async () => ({ contentType: registry.contentType, body: '' }),
  };
}
