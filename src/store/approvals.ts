import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { parsesAs, readJsonFile } from '../fs/json-file.js';
import { ownerAlive } from '../fs/process-identity.js';
import { atomicWriteFile, writeFileOnce } from '../fs/tree.js';
import { readdirIfExists } from '../fs/dir.js';

/**
 * What runs wait for someone to allow, on disk so that another process of the home (the CLI)
 * sees and answers them: `<state>/approvals/<id>.json`, the request, written by the process whose
 * run asked; `<id>.decision`, the answer, published by a hard link so that exactly one answer
 * wins (the person's chat, the operator's CLI or the timeout, whichever comes first). The asking
 * process reads the answers to its own requests and removes both files; a request whose process
 * is gone is nobody's and is removed when listed.
 */
export const APPROVAL_ID_PATTERN = /^[a-f0-9]{10}$/;
export const APPROVAL_DECISIONS = ['once', 'session', 'deny'] as const;
export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];

export const ApprovalRequestSchema = z
  .object({
    id: z.string().regex(APPROVAL_ID_PATTERN),
    kind: z
      .enum(['egress', 'secret', 'level', 'budget', 'forget'])
      .describe(
        "egress: a host outside the project's egress allowlist; secret: a granted secret whose grant asks first (ask: first_use), its first use in a conversation; level: a chat session's level above what the project lets its person take; budget: a chat message past its tenant's daily model budget; forget: a person's /forget (everything berth keeps of them removed).",
      ),
    project: z.string().max(128),
    tenant: z.string().max(1024),
    session: z.string().max(128),
    /** The run that waits (egress); "" for a level or a budget, which no run waits for yet. */
    run: z.string().max(128),
    /** egress: "host:port", a name the proxy checked (never a URL, never more than a host); secret: "NAME for host:port"; level: the level asked for; budget: the day's limit, in words. */
    target: z.string().max(260),
    approver: z.enum(['person', 'operator']).describe('Who may answer: the person in the chat (or the operator), or the operator only.'),
    asked_at: z.string(),
    expires_at: z.string(),
    owner: z.string().max(128).describe('The berth process whose run waits.'),
  })
  .strict();
export type ApprovalRequest = z.infer<typeof ApprovalRequestSchema>;

export const ApprovalAnswerSchema = z
  .object({
    decision: z.enum(APPROVAL_DECISIONS),
    /** Who answered: "tenant:<key>", "operator", or "timeout". */
    by: z.string().max(512),
    at: z.string(),
  })
  .strict();
export type ApprovalAnswer = z.infer<typeof ApprovalAnswerSchema>;

/** A request as the people who answer it see it. */
export type ApprovalView = Omit<ApprovalRequest, 'owner' | 'run'>;
/**
 * What a run's chat hears: a request, its answer (who, when; what was asked and when), and a host
 * someone allowed that still could not be reached (why, in words a person reads).
 */
export type ApprovalEvent =
  | { type: 'asked'; approval: ApprovalView }
  | {
      type: 'answered';
      id: string;
      kind?: ApprovalRequest['kind'];
      decision: ApprovalDecision;
      by: string;
      target: string;
      asked_at: string;
      at: string;
    }
  | { type: 'unreachable'; target: string; reason: string };
/** Someone who can be asked: the chat watching a run. */
export type ApprovalListener = (event: ApprovalEvent) => void;

/** Requests listed at most (a store holds one per waiting connection, bounded by the broker). */
const LIST_MAX = 1000;

export interface ApprovalStore {
  newId(): string;
  put(request: ApprovalRequest): void;
  /** Requests whose process lives, oldest first (stale ones are removed on the way). */
  list(): ApprovalRequest[];
  get(id: string): ApprovalRequest | undefined;
  /** Publish an answer: false when another answer was there first (nothing is changed then). */
  answer(id: string, answer: ApprovalAnswer): boolean;
  answerOf(id: string): ApprovalAnswer | undefined;
  remove(id: string): void;
}

export function openApprovalStore(stateDir: string): ApprovalStore {
  const dir = join(stateDir, 'approvals');
  const requestFile = (id: string) => join(dir, `${checkedId(id)}.json`);
  const answerFile = (id: string) => join(dir, `${checkedId(id)}.decision`);
  const read = <S extends z.ZodType>(file: string, schema: S): z.output<S> | undefined => {
    try {
      return readJsonFile(file, schema);
    } catch {
      return undefined; // torn by a crash or edited by hand: not a request anyone can answer
    }
  };
  const remove = (id: string) => {
    fs.rmSync(requestFile(id), { force: true });
    fs.rmSync(answerFile(id), { force: true });
  };

  return {
    newId: () => randomBytes(5).toString('hex'),
    put(request) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      atomicWriteFile(requestFile(request.id), JSON.stringify(request), 0o600, parsesAs(ApprovalRequestSchema));
    },
    list() {
      const all = readdirIfExists(dir);
      const names = all.filter((n) => n.endsWith('.json')).slice(0, LIST_MAX);
      const requests: ApprovalRequest[] = [];
      // An answer published as its request ended (a CLI a moment late) has nothing left to answer.
      for (const name of all.filter((n) => n.endsWith('.decision')).slice(0, LIST_MAX)) {
        const id = name.slice(0, -'.decision'.length);
        if (APPROVAL_ID_PATTERN.test(id) && !fs.existsSync(requestFile(id))) fs.rmSync(answerFile(id), { force: true });
      }
      for (const name of names) {
        const id = name.slice(0, -'.json'.length);
        if (!APPROVAL_ID_PATTERN.test(id)) continue;
        const request = read(requestFile(id), ApprovalRequestSchema);
        if (request?.id !== id) continue;
        if (!ownerAlive(request.owner)) {
          remove(id);
          continue;
        }
        requests.push(request);
      }
      return requests.sort((a, b) => a.asked_at.localeCompare(b.asked_at));
    },
    get(id) {
      if (!APPROVAL_ID_PATTERN.test(id)) return undefined;
      const request = read(requestFile(id), ApprovalRequestSchema);
      return request?.id === id && ownerAlive(request.owner) ? request : undefined;
    },
    // The first answer stands.
    answer: (id, answer) => writeFileOnce(answerFile(id), JSON.stringify(ApprovalAnswerSchema.parse(answer)), 0o600),
    answerOf(id) {
      return read(answerFile(id), ApprovalAnswerSchema);
    },
    remove,
  };
}

function checkedId(id: string): string {
  if (!APPROVAL_ID_PATTERN.test(id))
    throw new BerthError('APPROVAL_NOT_FOUND', `"${id.slice(0, 20)}" is not an approval id (10 characters of 0-9, a-f)`);
  return id;
}
