import { createCredentialUses } from './outbound/credential-uses.js';
import { createScheduleService, type ScheduleAsk, type ScheduleService } from './admin/schedules.js';
import { openScheduleStore, type ScheduleStore } from './store/schedules.js';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { agentOwner, createConfigSource, type BerthConfig } from './config/berth-config.js';
import { isBerthError } from './base/errors.js';
import { homePaths, type HomePaths } from './config/home.js';
import { createOperatorService, type OperatorService } from './admin/operator.js';
import { createFileTools, type FileTools } from './file-tools/service.js';
import { sharedGrantsFor } from './config/grants.js';
import { createAdminService, type AdminService } from './admin/service.js';
import { audited, createAuditTrail, projectAnd, type AuditTrail } from './admin/audit-trail.js';
import { auditFile } from './store/audit.js';
import { createDockerLauncher } from './launch/docker/launcher.js';
import { createKubeSetup, type KubeSetup } from './launch/kubernetes/setup.js';
import { KUBE_NO_FILE_TOOLS, KubernetesSchema } from './config/kubernetes.js';
import { createDockerImages } from './launch/docker/images.js';
import type { ImageStore } from './launch/images.js';
import type { Launcher } from './launch/launcher.js';
import { openFileToolsSocket } from './mcp/file-tools-socket.js';
import { createRunner, type Runner } from './runs/runner.js';
import { createAdmission, type Admission } from './runs/admission.js';
import { createWarmPool } from './runs/warm-pool.js';
import { createPrestartPool } from './runs/prestart-pool.js';
import type { RateWindows } from './plan/pool-size.js';
import { mountHelper } from './launch/docker/late-mounts.js';
import { admissionLimitsOf, DEFAULT_WARM_PER_TENANT, poolBoundsOf } from './config/runs.js';
import { createMetrics, type Metrics } from './base/metrics.js';
import { createModelGateway } from './outbound/model-gateway.js';
import { createEgressProxy } from './outbound/egress-proxy.js';
import { createHoneytokens, type Honeytokens } from './outbound/honeytokens.js';
import { createAlertWebhook } from './outbound/alert-webhook.js';
import { openFrozenTenants } from './store/frozen-tenants.js';
import { openDecoyHolders } from './store/decoy-holders.js';
import { loadOrCreateEgressCa, type EgressCa } from './outbound/egress-ca.js';
import { createSecretBroker } from './outbound/secret-broker.js';
import { createSecretValues } from './store/secret-values.js';
import { createApprovals, type Approvals } from './outbound/approvals.js';
import { openApprovalStore } from './store/approvals.js';
import { processIdentity } from './fs/process-identity.js';
import { createProjectStore, type CreateStep, type ProjectStore } from './store/projects.js';
import { loadOrCreateSecret, memoryAuthorFor } from './store/secret.js';
import { createSessionStore, type SessionStore } from './store/sessions.js';
import { createSessionTokens, type SessionTokens } from './store/session-tokens.js';
import { createSessionTools, type SessionTools } from './admin/session-tools.js';
import { createTenantData, type TenantData } from './admin/tenant-data.js';

/** Everything berth needs, built once from the home directory. The only place that wires deps. */
export interface Berth {
  home: string;
  /** The audit log (admin actions, refusals, sandbox violations), a hash chain. */
  audit: AuditTrail;
  config: BerthConfig;
  store: ProjectStore;
  /** What runs the plans (launch/launcher.ts), and where their images are. */
  launcher: Launcher;
  /** launcher: kubernetes: the listener its pods' relays reach (serve opens it). */
  kubeRelay?: KubeSetup['relay'];
  images: ImageStore;
  runner: Runner;
  admin: AdminService;
  sessions: SessionStore;
  tokens: SessionTokens;
  sessionTools: SessionTools;
  operator: OperatorService;
  fileTools: FileTools;
  secret: Buffer;
  logger: Logger;
  /** Prometheus metrics of this process (GET /metrics). */
  metrics: Metrics;
  /** A token that opens /metrics only (BERTH_METRICS_TOKEN); the admin token opens it too. */
  metricsToken?: string;
  /** Concurrent runs: global, per project, per tenant, and the fair queue beyond them. */
  admission: Admission;
  /** What runs wait for someone to allow (a host outside the egress allowlist). */
  approvals: Approvals;
  /** Schedules (admin/schedules.ts) on their durable store (store/schedules.ts); serve's scheduler fires them. */
  schedules: ScheduleService;
  scheduleStore: ScheduleStore;
  /** A person's data, whole: export it, forget it (admin/tenant-data.ts). */
  tenants: TenantData;
  /** Decoy credentials (berth.yaml projects.<p>.honeytokens): the API looks for them too (api/decoy-tripwire.ts). */
  honeytokens: Honeytokens;
}

export interface BerthOptions {
  home: string;
  logLevel?: string;
  launcher?: Launcher;
  images?: ImageStore;
  onCreateStep?: (step: CreateStep) => void;
  /** Where log lines go (default: stderr). */
  logDestination?: { write(line: string): void };
  metricsToken?: string;
  /** Also export the process's own metrics (CPU, memory, event loop): for a long-running server. */
  processMetrics?: boolean;
  /** Keep each session's container warm between messages (berth.yaml runs.warm_*): for a long-running server. */
  warm?: boolean;
  /**
   * Tests: with warm, `always` takes every new session's container from the pre-started pool
   * (runs/prestart-pool.ts), `off` keeps none; otherwise berth.yaml runs.pool decides.
   */
  pool?: 'always' | 'off';
  /** Tests: the windows the pool reads its arrival rate over (plan/pool-size.ts RATE_WINDOWS), shorter. */
  poolWindows?: RateWindows;
}

/** Resolve the home once (real path, so mount-source checks compare like with like). */
export function resolveHome(home: string): string {
  const abs = resolve(home);
  fs.mkdirSync(abs, { recursive: true });
  return fs.realpathSync(abs);
}

/** The admin actions the audit log records: project changes, sessions, tokens, chat links. */
const ADMIN_AUDIT = {
  createProject: ['project.create', (args: unknown[]) => ({ project: (args[0] as { name?: string } | undefined)?.name })],
  updateProject: ['project.update', projectAnd()],
  deleteProject: ['project.delete', projectAnd()],
  openSession: ['session.open', projectAnd(1)],
  updateSession: ['session.settings', projectAnd(1)],
  renameSession: ['session.rename', projectAnd(1)],
  deleteSession: ['session.delete', projectAnd(1)],
  snapshotSession: ['session.snapshot', projectAnd(1)],
  restoreSession: ['session.restore', projectAnd(1)],
  forkSession: ['session.fork', projectAnd(1)],
  mintSessionToken: ['session.token.mint', projectAnd(1)],
  revokeSessionTokens: ['session.token.revoke', projectAnd(1)],
  mintChatLink: ['chat_link.mint', projectAnd(1)],
  revokeChatUser: ['chat_link.revoke', projectAnd(1)],
  stopRun: ['run.stop', projectAnd(1)],
  pauseProject: ['project.pause', projectAnd()],
  resumeProject: ['project.resume', projectAnd()],
  endSession: ['session.end', projectAnd(1)],
} satisfies Partial<Record<keyof AdminService, [string, (args: unknown[]) => { project?: string; target?: string }]>>;

/** Decoy credentials and the tenants frozen for using one (berth.yaml projects.<p>.honeytokens); a hit alerts the operator's webhook too. */
function honeytokensOf(b: {
  config: () => BerthConfig;
  secret: () => Buffer;
  stateDir: string;
  logger: Logger;
  metrics: Metrics;
  audit: AuditTrail;
  sessions: SessionStore;
  store: ProjectStore;
}): Honeytokens {
  return createHoneytokens({
    config: b.config,
    secret: b.secret,
    frozen: openFrozenTenants(b.stateDir),
    holders: openDecoyHolders(b.stateDir),
    logger: b.logger,
    metrics: b.metrics,
    audit: (event) => b.audit.record(event),
    alert: createAlertWebhook({ settings: () => b.config().alerts, logger: b.logger }).send,
    tenantsOf: (project) => {
      try {
        return b.sessions.list(b.store.get(project)).map((s) => s.tenant_key);
      } catch {
        return []; // a project berth.yaml names that does not exist (yet)
      }
    },
  });
}

/** Stable per berth home; labels its containers so installations sharing an engine stay apart. */
export function installationId(home: string): string {
  return createHash('sha256').update(home).digest('hex').slice(0, 16);
}

/** berth.yaml as it is now; an edit that is invalid is logged and the last valid settings kept. */
function watchConfig(file: string, home: string, logger: Logger): () => BerthConfig {
  return createConfigSource(file, home, (err) =>
    logger.error(
      { err: isBerthError(err) ? err.toLine() : String(err) },
      'berth.yaml changed but is invalid; keeping the last valid settings',
    ),
  );
}

/** The pre-started pool's own directories: attach's blank stand-ins (cache), adopt's fresh directories (private state; the agent user's, as a person's own are). */
function poolDirsOf(paths: HomePaths, config: () => BerthConfig) {
  return { blankDir: join(paths.cacheDir, 'pool'), adoptDir: join(paths.stateDir, 'adopt'), owner: () => agentOwner(config()) };
}

export function createBerth(opts: BerthOptions): Berth {
  const home = resolveHome(opts.home);
  const paths = homePaths(home);
  const logger = pino({ level: opts.logLevel ?? 'warn', base: undefined }, opts.logDestination ?? pino.destination(2));
  const config = watchConfig(paths.configFile, home, logger);
  const store = createProjectStore({ root: home, config, onCreateStep: opts.onCreateStep });
  // berth.yaml launcher: kubernetes (read once: a change takes a restart, as a new engine would).
  const kube =
    !opts.launcher && config().launcher === 'kubernetes'
      ? createKubeSetup(config().kubernetes ?? KubernetesSchema.parse({}), (why) => logger.warn({ why }, 'refused a relay connection'))
      : undefined;
  const launcher = opts.launcher ?? kube?.launcher ?? createDockerLauncher(undefined, { mountHelper: () => mountHelper(paths.cacheDir) });
  const images = opts.images ?? createDockerImages();
  let runner: Runner | undefined;
  let secret: Buffer | undefined;
  let admin: AdminService | undefined;
  let sessionTools: SessionTools | undefined;
  let tenants: TenantData | undefined;
  let schedules: ScheduleService | undefined;
  const scheduleStore = openScheduleStore(paths.stateDir);
  let operator: OperatorService | undefined;
  const tokens = createSessionTokens(join(paths.stateDir, 'session-tokens'));
  // Created on first use, so read-only commands never write to the home.
  const getSecret = () => (secret ??= loadOrCreateSecret(paths.secretFile));
  const sessions = createSessionStore({ projects: store, secret: getSecret });
  const audit = createAuditTrail(auditFile(paths.stateDir), logger);
  const getOperator = () =>
    (operator ??= audited(createOperatorService({ home, store, config, logger }), audit, {
      grant: ['grant', projectAnd(1)],
      revoke: ['grant.revoke', projectAnd(1)],
      setPrivateWorkspace: ['private_workspace.move', projectAnd()],
      setConfig: ['config.set', (args) => ({ target: (args[0] as string[]).join('.') })],
      unsetConfig: ['config.unset', (args) => ({ target: (args[0] as string[]).join('.') })],
    }));
  const metrics = createMetrics({ processMetrics: opts.processMetrics ?? false });
  const admission = createAdmission({
    limits: () => admissionLimitsOf(config()),
    onChange: (s) => {
      metrics.setQueueDepth(s.queued);
      metrics.setRunsInFlight(s.inFlight);
    },
  });
  const fileTools = createFileTools({
    metrics,
    store,
    secret: getSecret,
    owner: () => agentOwner(config()),
    logger,
  });
  const honeytokens = honeytokensOf({ config, secret: getSecret, stateDir: paths.stateDir, logger, metrics, audit, sessions, store });
  // One of each per process: budgets and connection bounds hold across runs.
  const models = createModelGateway({ config, logger, metrics, honeytokens });
  const approvals = createApprovals({
    store: openApprovalStore(paths.stateDir),
    logger,
    audit: (event) => audit.record(event),
    sessionHosts: (project, session) => {
      try {
        return sessions.get(project, session).session.approved_hosts ?? [];
      } catch {
        return []; // the session is gone: it allows nothing
      }
    },
    approveForSession: (project, session, target) => void sessions.approveHost(project, session, target),
    raiseLevel: (project, id, level) => {
      const found = sessions.get(project, id);
      sessions.setLevel(found.project, found.session, level);
    },
  });
  const broker = createSecretBroker({ config, values: createSecretValues(), metrics, audit: (event) => audit.record(event), approvals });
  let egressCa: EgressCa | undefined;
  // Made on first use: an installation that brokers no secret never has one.
  const ca = () => (egressCa ??= loadOrCreateEgressCa(paths.stateDir));
  const credentialUses = createCredentialUses();
  const egress = createEgressProxy({ config, logger, metrics, approvals, broker, ca, credentialUses, honeytokens });
  const getRunner = () =>
    (runner ??= createRunner({
      store,
      sessions,
      launcher,
      config,
      secret: getSecret(),
      installation: installationId(home),
      logger,
      ownerProcess: processIdentity(),
      admission,
      metrics,
      audit: (event) => audit.commit(event),
      credentialUses,
      honeytokens,
      transcriber: models.transcriber,
      egressTrust: () => ca().files,
      prestarted:
        opts.warm && opts.pool !== 'off'
          ? createPrestartPool({
              launcher,
              ...poolBoundsOf(config, opts.pool === 'always'),
              ...(opts.poolWindows ? { windows: opts.poolWindows } : {}),
              ...poolDirsOf(paths, config),
              logger,
              onSize: (n) => metrics.setPoolContainers(n),
              busy: () => admission.stats().queued > 0,
              always: opts.pool === 'always',
            })
          : undefined,
      warm: opts.warm
        ? createWarmPool({
            launcher,
            idleMs: () => config().runs.warm_idle_seconds * 1000,
            max: () => config().runs.warm_max,
            perTenant: () => config().runs.warm_per_tenant ?? DEFAULT_WARM_PER_TENANT,
            logger,
            onSize: (n) => metrics.setWarmContainers(n),
          })
        : undefined,
      sockets: {
        dir: join(paths.stateDir, 'sockets'),
        open: {
          gateway: ({ path, run, logger: log }) =>
            openFileToolsSocket({
              path,
              caller: fileTools.forCaller(
                {
                  project: run.project,
                  tenantKey: run.tenantKey,
                  workspaceId: run.workspaceId,
                  ...(run.workspaceSession ? { session: run.workspaceSession } : {}),
                },
                { keepOpen: true },
              ),
              logger: log,
              // The file tools work on berth's own copies of workspaces; a pod's workspace is its volume.
              ...(config().launcher === 'kubernetes' ? { withoutFiles: KUBE_NO_FILE_TOOLS } : {}),
            }),
          model: models.open,
          egress: egress.open,
        },
      },
    }));
  const getSchedules = () =>
    (schedules ??= audited(createScheduleService({ store: scheduleStore, config, project: (name) => store.get(name).metadata }), audit, {
      add: ['schedule.add', (args) => ({ project: (args[0] as ScheduleAsk).project, target: (args[0] as ScheduleAsk).tenant })],
      addFor: ['schedule.add', projectAnd()],
      cancel: ['schedule.cancel', (args) => ({ target: String(args[0]) })],
    }));
  return {
    home,
    audit,
    metrics,
    metricsToken: opts.metricsToken,
    admission,
    approvals,
    honeytokens,
    get config() {
      return config();
    },
    store,
    launcher,
    ...(kube ? { kubeRelay: kube.relay } : {}),
    images,
    logger,
    sessions,
    get secret() {
      return getSecret();
    },
    get runner() {
      return getRunner();
    },
    get admin() {
      return (admin ??= audited(
        createAdminService({
          store,
          sessions,
          tokens,
          runner: getRunner,
          fileTools,
          config,
          assertGranted: (project, area) => getOperator().assertGranted(project, area),
        }),
        audit,
        ADMIN_AUDIT,
      ));
    },
    tokens,
    fileTools,
    scheduleStore,
    get schedules() {
      return getSchedules();
    },
    get operator() {
      return getOperator();
    },
    get tenants() {
      return (tenants ??= createTenantData(this));
    },
    get sessionTools() {
      return (sessionTools ??= createSessionTools({
        sessions,
        runner: getRunner,
        fileTools,
        grants: (project) => sharedGrantsFor(config(), project),
        assertGranted: (project, area) => getOperator().assertGranted(project, area),
        memoryAuthor: (project, tenantKey) => memoryAuthorFor(getSecret(), project, tenantKey),
        logger,
        schedules: getSchedules,
      }));
    },
  };
}
