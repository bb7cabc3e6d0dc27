import type { ApprovalListener } from '../store/approvals.js';
import type { ProjectMetadata } from '../config/metadata.js';

/** Who is calling through a run's socket: known from which socket, never from what is sent. */
export interface RunIdentity {
  runId: string;
  project: string;
  metadata: ProjectMetadata;
  tenantKey: string;
  session: string;
  /** Its workspace, as the runner derived it (never derived again). */
  workspaceId: string;
  /** Set when that workspace is the session's own (workspace mode "session"): the session, for the file tools. */
  workspaceSession?: string;
  /** Where the project's outbound log lives. */
  sessionsDir: string;
  /** The chat watching this run, which can ask its person (egress approvals); none: an API or CLI run. */
  ask?: ApprovalListener;
  /** Aborted once the agent said its answer: nobody is asked for it after that (its CLI's own calls). */
  answered?: AbortSignal;
}

/**
 * Serves one run's socket at `path` until closed (model gateway, egress proxy, file tools).
 * `stopRun`: the run cannot go on (its model service cannot be reached): berth stops it, and the
 * reason, in words a chat user reads, goes into its record and reply.
 */
export type RunSocketOpener = (opts: {
  path: string;
  run: RunIdentity;
  logger: import('pino').Logger;
  stopRun: (reason: string) => void;
}) => Promise<{ close(): Promise<void> }>;
