import type { Logger } from 'pino';
import type { Metrics } from '../base/metrics.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { Launcher } from '../launch/launcher.js';
import type { CredentialUses } from '../outbound/credential-uses.js';
import type { Honeytokens } from '../outbound/honeytokens.js';
import type { ProjectStore } from '../store/projects.js';
import type { SessionStore } from '../store/sessions.js';
import type { Admission } from './admission.js';
import type { PrestartPool } from './prestart-pool.js';
import type { Transcriber } from './run-files.js';
import type { ReceiptAudit } from './run-receipt.js';
import type { RunSocketsConfig } from './run-sockets.js';
import type { WarmPool } from './warm-pool.js';

/** What a runner is built from (runner.ts): the stores, the engine, and the per-process parts it shares. */
export interface RunnerDeps {
  store: ProjectStore;
  sessions: SessionStore;
  launcher: Launcher;
  config: () => BerthConfig;
  secret: Buffer;
  installation: string;
  logger: Logger;
  /** Each run's sockets, in its own directory below `dir`, opened by the composition root's openers. */
  sockets?: RunSocketsConfig;
  /** This process (its process identity, "<pid>.<start time>.<boot>"), recorded on every run it owns. */
  ownerProcess?: string;
  /** Admission control (one per process); without it every run starts at once. */
  admission?: Admission;
  /** Warm session containers (berth serve, berth bridge); without it each message gets a new container. */
  warm?: WarmPool;
  /** Containers started before their tenant is known (with warm only): a new session's first message claims one. */
  prestarted?: PrestartPool;
  metrics?: Metrics;
  /** berth's egress CA files (made on first call), for runs whose project holds secret grants. */
  egressTrust?: () => { ca: string; bundle: string };
  /** The audit trail: each run's receipt digest, and its violations. */
  audit?: ReceiptAudit;
  /** The requests each run's egress added a granted secret to: its receipt lists them. */
  credentialUses?: Pick<CredentialUses, 'take'>;
  /** Decoy credentials (berth.yaml projects.<p>.honeytokens), and tenants frozen for using one. */
  honeytokens?: Pick<Honeytokens, 'decoysFor' | 'assertNotFrozen' | 'check'>;
  /** berth.yaml's transcription upstream (the model gateway's), for a message's voice notes; none: voice is not enabled. */
  transcriber?: Transcriber;
}
