import { printable } from './printable.js';

/**
 * One error type with stable string codes. Callers match on `code`, never on message text.
 * The table maps every code to an HTTP status and a CLI exit code, so each surface
 * (CLI, HTTP, MCP) reports the same failure the same way. MCP needs no column: a tool that fails
 * answers its call with `isError` and the same body (the spec's tool execution error), whatever
 * the code; only a call berth cannot take (unknown tool, arguments its schema refuses) is the
 * JSON-RPC error -32602, with the body as its data (mcp/server.ts).
 */
export const ERROR_TABLE = {
  CONFIG_INVALID: { status: 400, exit: 2 },
  USAGE: { status: 400, exit: 64 },
  UNAUTHORIZED: { status: 401, exit: 10 },
  PROJECT_NOT_FOUND: { status: 404, exit: 3 },
  NOT_FOUND: { status: 404, exit: 23 },
  PROJECT_EXISTS: { status: 409, exit: 4 },
  ENGINE_UNAVAILABLE: { status: 503, exit: 5 },
  IMAGE_MISSING: { status: 424, exit: 6 },
  RUN_TIMEOUT: { status: 504, exit: 124 },
  RUN_FAILED: { status: 500, exit: 7 },
  E_SANDBOX_VIOLATION: { status: 403, exit: 8 },
  PERMISSION_DENIED: { status: 403, exit: 11 },
  SESSION_NOT_FOUND: { status: 404, exit: 12 },
  WORKFLOW_NOT_FOUND: { status: 404, exit: 13 },
  WORKFLOW_FAILED: { status: 422, exit: 14 },
  AREA_NOT_GRANTED: { status: 403, exit: 15 },
  FILE_CHANGED: { status: 409, exit: 16 },
  LOCKED: { status: 409, exit: 9 },
  PAYLOAD_TOO_LARGE: { status: 413, exit: 17 },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, exit: 18 },
  NOT_ACCEPTABLE: { status: 406, exit: 19 },
  METHOD_NOT_ALLOWED: { status: 405, exit: 22 },
  BUSY: { status: 429, exit: 20 },
  /** berth is draining for a shutdown: it admits no new run (75 = sysexits' EX_TEMPFAIL: try again later). */
  SHUTTING_DOWN: { status: 503, exit: 75 },
  DISK_FULL: { status: 507, exit: 21 },
  DISK_QUOTA_FAILED: { status: 500, exit: 24 },
  /** serve's port is taken (another berth, or another program): it exits before starting anything. */
  ADDRESS_IN_USE: { status: 503, exit: 25 },
  /** Another live process of this home already does this (a bridge has one consumer per home). */
  ALREADY_RUNNING: { status: 409, exit: 26 },
  /** A per-person bound was reached (sessions per chat user, logins, session creations per minute). */
  LIMIT_REACHED: { status: 429, exit: 27 },
  /** The project's OCI runtime (runc, runsc, ...) is not one the engine offers, or not one berth.yaml names. */
  RUNTIME_MISSING: { status: 424, exit: 28 },
  /** The launcher cannot do what this needs (host paths, Unix sockets, loop quotas): refused, never half-done. */
  LAUNCHER_UNSUPPORTED: { status: 501, exit: 29 },
  /** No request of that id waits for an answer (answered already, timed out, its run ended, or someone else's). */
  APPROVAL_NOT_FOUND: { status: 404, exit: 30 },
  /** A brokered secret's value cannot be had: its file is missing or readable by others, its variable unset, its command failed. */
  SECRET_UNAVAILABLE: { status: 503, exit: 31 },
  /** A file is larger than the bound it is fetched or sent under (a chat attachment, an upload): refused, nothing of it kept. */
  TOO_LARGE: { status: 413, exit: 32 },
  /** The OpenID Connect provider did not answer, or refused berth's exchange of a sign-in (the person is told to start again). */
  SIGN_IN_FAILED: { status: 502, exit: 40 },
  /** No checkpoint of that id is kept for the session (pruned, used up by a restore, or never made). */
  CHECKPOINT_NOT_FOUND: { status: 404, exit: 33 },
  /** Its operator paused the project: no new run starts until it is resumed (runs going on finish). */
  PROJECT_PAUSED: { status: 423, exit: 34 },
  /** The cluster refused a run's pod or cannot run it (no node fits its requests, its volumes or sandbox cannot be made): its reason in words, at once, not after the start timeout. */
  POD_REFUSED: { status: 503, exit: 35 },
  /** The agent cannot write its cluster volume: the StorageClass's driver ignores fsGroup (the message names the class). */
  VOLUME_UNWRITABLE: { status: 500, exit: 36 },
  INTERNAL: { status: 500, exit: 70 },
} as const;

export type ErrorCode = keyof typeof ERROR_TABLE;

export interface FieldIssue {
  field: string;
  reason: string;
}

export interface BerthErrorDetails {
  /** Fields at fault, for CONFIG_INVALID. */
  issues?: FieldIssue[];
  /** A path involved, e.g. for E_SANDBOX_VIOLATION. */
  path?: string;
  /** What the user can do about it (a command to run, a setting to change). */
  hint?: string;
  /** For PERMISSION_DENIED: the rule that refused. */
  rule?: string;
  /** For E_SANDBOX_VIOLATION: always "sandbox_violation". */
  kind?: 'sandbox_violation';
  /** For BUSY: seconds after which trying again makes sense. */
  retry_after?: number;
}

export class BerthError extends Error {
  override readonly name = 'BerthError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: BerthErrorDetails = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get status(): number {
    return ERROR_TABLE[this.code].status;
  }

  get exitCode(): number {
    return ERROR_TABLE[this.code].exit;
  }

  /** The one-line form the CLI prints: `<CODE>: <reason>` (input quoted in it is made printable). */
  toLine(): string {
    const fields = this.details.issues?.map((i) => `${i.field}: ${i.reason}`).join('; ');
    const hint = this.details.hint ? ` (${this.details.hint})` : '';
    return printable(`${this.code}: ${this.message}${fields ? ` — ${fields}` : ''}${hint}`);
  }

  toJSON() {
    return { code: this.code, message: this.message, ...this.details };
  }
}

export function isBerthError(err: unknown, code?: ErrorCode): err is BerthError {
  return err instanceof BerthError && (code === undefined || err.code === code);
}

/** Node's errno code of an fs error, if any. */
export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** Any failure → berth's error: a full disk is DISK_FULL, anything unknown is INTERNAL (a bug). */
export function asBerthError(err: unknown): BerthError {
  if (err instanceof BerthError) return err;
  const errno = errnoOf(err);
  if (errno === 'ENOSPC' || errno === 'EDQUOT') {
    return new BerthError(
      'DISK_FULL',
      "the disk holding berth's home is full; nothing was changed",
      { hint: 'free space, then try again ("berth doctor" shows usage)' },
      { cause: err },
    );
  }
  return new BerthError('INTERNAL', 'internal error', {}, { cause: err });
}

/** The body every surface answers an error with: `{"error": {"code", "message", ...}}`. */
export function errorBody(err: BerthError) {
  return { error: err.toJSON() };
}
