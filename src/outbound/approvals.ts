import { auditActionOf, deniedWords, notAllowedWords, type RunAsk } from './approval-reasons.js';
import type { Logger } from 'pino';
import type { AuditEvent } from '../store/audit.js';
import { BerthError } from '../base/errors.js';
import { selfIdentity } from '../fs/process-identity.js';
import type {
  ApprovalAnswer,
  ApprovalDecision,
  ApprovalListener,
  ApprovalRequest,
  ApprovalStore,
  ApprovalView,
} from '../store/approvals.js';
import type { RunIdentity } from './run-identity.js';
import type { PermissionLevel } from '../config/session.js';

/**
 * Ask before going past a grant: a run's host outside its project's egress allowlist, or a chat
 * person's level above what the project lets them take (operator only; no run waits). The run's
 * connections wait in the proxy (the agent retries nothing; one that gives up meanwhile denies
 * nothing) while its project's approver is asked: the person watching the run in a chat (a card,
 * /yes /no) or the operator only (berth approvals, the console). An answer is "once" (this run
 * may reach the host), "session" (this conversation may, from now on) or "deny"; none within
 * chat.approval_timeout_seconds is a denial. Every answer is audited. The requests are on disk
 * (store/approvals.ts), so the CLI of another process answers them too; this process reads those
 * answers every ANSWER_POLL_MS while any wait.
 */

/** Who answers: the operator (CLI, console), or a person of the chat (only their own tenant's requests, only when the project lets the person answer). */
export type Answerer = { operator: true; actor: string } | { operator?: false; actor: string; project: string; tenant: string };

/** `quiet`: refused without asking anyone, as routine (the agent had answered): no warning logged. */
export type Verdict = { allowed: true } | { allowed: false; reason: string; quiet?: boolean };

export interface Approvals {
  /**
   * May this run reach `target` ("host:port"), which its allowlist does not name, or (kind
   * secret) have "NAME for host:port" added, whose grant asks first? Asks, and waits for the answer.
   */
  request(run: RunIdentity, target: string, kind?: RunAsk): Promise<Verdict>;
  /** An answer from this process (a chat, the console): APPROVAL_NOT_FOUND unless it waits and is the answerer's to give. */
  answer(id: string, decision: ApprovalDecision, by: Answerer): ApprovalView;
  /** What waits (in any process of the home), oldest first; a person's filter shows their own only. */
  pending(filter?: { project?: string; tenant?: string }): ApprovalView[];
  /** The run's connections are closed: what it still waits for is denied, what it was allowed once is forgotten. */
  endRun(runId: string): void;
  /**
   * A chat session's person asks for a level above what the project lets them take: only the
   * operator may allow it (the session's level is raised then). `told`: the answer, for the chat.
   * One request per session waits at a time (asking again returns it).
   */
  requestLevel(
    req: { project: string; tenant: string; session: string; level: PermissionLevel; timeoutSeconds: number },
    told: (answer: ApprovalAnswer) => void,
  ): ApprovalView;
  /** A chat person's /forget: only the operator may allow it (`told` runs it then); one per tenant waits at a time. */
  requestForget(
    req: { project: string; tenant: string; session: string; timeoutSeconds: number },
    told: (answer: ApprovalAnswer) => void,
  ): ApprovalView;
  /**
   * A chat message held at its tenant's daily model budget: its approver (the person or the
   * operator, as chat.approvals says) may let it and the day's next ones past. `listen` hears the
   * request and its answer (the chat's card or question); the promise, the answer that stands.
   */
  requestBudget(
    req: { project: string; tenant: string; session: string; target: string; approver: 'person' | 'operator'; timeoutSeconds: number },
    listen: ApprovalListener,
  ): Promise<ApprovalAnswer>;
}

export const APPROVAL_BOUNDS = {
  /** Requests one run may make (each a card or a message someone must read). */
  asksPerRun: 8,
  /** Requests waiting at once in this process. */
  pendingMax: 200,
} as const;
export const ANSWER_POLL_MS = 500;

interface RunState {
  allowed: Set<string>;
  denied: Map<string, string>;
  asks: number;
  waiting: Map<string, Promise<Verdict>>;
  /** Its `answered` signal is listened to (once per run). */
  heedsAnswer?: boolean;
}

interface Waiter {
  request: ApprovalRequest;
  /** The run that waits (egress requests). */
  run?: RunIdentity;
  /** Who hears the answer besides the promise (a budget request's chat). */
  listen?: ApprovalListener;
  settle: (answer: ApprovalAnswer) => void;
}

export function createApprovals(deps: {
  store: ApprovalStore;
  logger: Logger;
  audit: (event: Omit<AuditEvent, 'request_id'>) => void;
  /** Hosts the run's conversation was allowed before (read when asked: a grant given meanwhile counts). */
  sessionHosts: (project: string, session: string) => readonly string[];
  approveForSession: (project: string, session: string, target: string) => void;
  /** A level request the operator allowed: the session gets it. */
  raiseLevel: (project: string, session: string, level: PermissionLevel) => void;
  now?: () => number;
}): Approvals {
  const now = deps.now ?? Date.now;
  const runs = new Map<string, RunState>();
  const waiters = new Map<string, Waiter>();
  let poll: NodeJS.Timeout | undefined;
  const owner = selfIdentity();

  const stateOf = (runId: string): RunState => {
    let s = runs.get(runId);
    if (!s) runs.set(runId, (s = { allowed: new Set(), denied: new Map(), asks: 0, waiting: new Map() }));
    return s;
  };
  const viewOf = ({ owner: _o, run: _r, ...view }: ApprovalRequest): ApprovalView => view;

  /** The answer that stands (the first published) is applied once: recorded, told, remembered. */
  function settle(id: string, given: ApprovalAnswer) {
    let answer = given;
    const w = waiters.get(id);
    if (!w) return;
    waiters.delete(id);
    deps.store.remove(id);
    if (waiters.size === 0) stopPolling();
    const { request, run } = w;
    const allowed = answer.decision !== 'deny';
    try {
      if (request.kind === 'level' && allowed) deps.raiseLevel(request.project, request.session, request.target as PermissionLevel);
      else if (answer.decision === 'session' && (request.kind === 'egress' || request.kind === 'secret'))
        deps.approveForSession(request.project, request.session, request.target);
    } catch (err) {
      deps.logger.warn({ err: String(err).slice(0, 200), id }, 'could not keep the approval for the session');
      if (request.kind === 'level') answer = { ...answer, decision: 'deny' }; // the level stays: the chat must not hear otherwise
    }
    const action = auditActionOf(request.kind, answer);
    deps.audit({
      kind: 'admin',
      action,
      actor: answer.by === 'timeout' ? 'berth' : answer.by,
      project: request.project,
      target: `${request.target} for ${request.tenant} (session ${request.session})`,
      outcome: 'ok',
    });
    deps.logger.info({ id, target: request.target, decision: answer.decision, by: answer.by }, 'approval answered');
    (w.listen ?? run?.ask)?.({
      type: 'answered',
      id,
      kind: request.kind,
      decision: answer.decision,
      by: answer.by,
      target: request.target,
      asked_at: request.asked_at,
      at: answer.at,
    });
    w.settle(answer);
  }

  function startPolling() {
    poll ??= setInterval(() => {
      for (const id of [...waiters.keys()]) {
        const answer = deps.store.answerOf(id);
        if (answer) settle(id, answer);
      }
    }, ANSWER_POLL_MS);
    poll.unref();
  }
  function stopPolling() {
    clearInterval(poll);
    poll = undefined;
  }

  /** Publish an answer (the first one wins, in this process or another) and apply the one that stands. */
  function publish(id: string, answer: ApprovalAnswer) {
    deps.store.answer(id, answer);
    const standing = deps.store.answerOf(id);
    if (standing) settle(id, standing);
  }

  /** A request on disk, waiting: denied at its timeout unless an answer (from any process) comes first; `onAnswer` gets the one that stands. */
  function hold(
    fields: Omit<ApprovalRequest, 'id' | 'asked_at' | 'expires_at' | 'owner'>,
    timeoutSeconds: number,
    run: RunIdentity | undefined,
    onAnswer: (answer: ApprovalAnswer) => void,
    listen?: ApprovalListener,
  ): ApprovalRequest {
    const at = now();
    const request: ApprovalRequest = {
      ...fields,
      id: deps.store.newId(),
      asked_at: new Date(at).toISOString(),
      expires_at: new Date(at + timeoutSeconds * 1000).toISOString(),
      owner,
    };
    deps.store.put(request);
    const timer = setTimeout(
      () => publish(request.id, { decision: 'deny', by: 'timeout', at: new Date().toISOString() }),
      timeoutSeconds * 1000,
    );
    timer.unref();
    waiters.set(request.id, {
      request,
      run,
      listen,
      settle: (answer) => {
        clearTimeout(timer);
        onAnswer(answer);
      },
    });
    startPolling();
    return request;
  }

  /** What the run waits for is denied now (by berth): its agent answered, or its connections closed. */
  function denyWaiting(runId: string) {
    for (const [id, w] of waiters)
      if (w.request.run === runId) publish(id, { decision: 'deny', by: 'berth', at: new Date().toISOString() });
  }

  async function ask(run: RunIdentity, state: RunState, target: string, kind: RunAsk): Promise<Verdict> {
    const { approvals: approver, approval_timeout_seconds: timeout } = run.metadata.chat;
    const notListed = notAllowedWords(kind, target, run.project);
    if (approver === 'off') return { allowed: false, reason: notListed };
    if (approver === 'person' && !run.ask)
      return { allowed: false, reason: `${notListed}, and nobody watches this run to allow it (a chat asks its person)` };
    if (state.asks >= APPROVAL_BOUNDS.asksPerRun)
      return { allowed: false, reason: `${notListed}, and this run asked ${APPROVAL_BOUNDS.asksPerRun} times already` };
    if (waiters.size >= APPROVAL_BOUNDS.pendingMax)
      return { allowed: false, reason: `${notListed}, and too many requests wait for an answer` };
    // After its answer the agent works for itself (a CLI's background calls): nobody is held or asked for that.
    if (run.answered?.aborted)
      return { allowed: false, reason: `${notListed}, and the agent had already answered (nobody is asked after that)`, quiet: true };
    if (run.answered && !state.heedsAnswer) {
      state.heedsAnswer = true;
      run.answered.addEventListener('abort', () => denyWaiting(run.runId), { once: true });
    }
    state.asks++;
    const answer = await new Promise<ApprovalAnswer>((resolve) => {
      const request = hold(
        { kind, project: run.project, tenant: run.tenantKey, session: run.session, run: run.runId, target, approver },
        timeout,
        run,
        resolve,
      );
      const what = `${kind === 'secret' ? 'secret ' : ''}${target}`;
      deps.logger.info(
        { id: request.id, target, kind, project: run.project, tenant: run.tenantKey, approver },
        approver === 'operator'
          ? `a run asks for ${what}: berth approvals allow ${request.id} (or deny)`
          : `a run asks its person for ${what}`,
      );
      run.ask?.({ type: 'asked', approval: viewOf(request) });
    });
    if (answer.decision === 'deny') {
      const reason = `${notListed}, and ${deniedWords(kind, answer.by, timeout)}`;
      state.denied.set(target, reason);
      return { allowed: false, reason };
    }
    state.allowed.add(target);
    return { allowed: true };
  }

  /** A chat person's request only the operator may allow (a level, a forget): one per kind and session (or tenant, for a forget) waits at a time. */
  function askOperator(
    req: { kind: 'level' | 'forget'; project: string; tenant: string; session: string; target: string; timeoutSeconds: number },
    told: (answer: ApprovalAnswer) => void,
    what: string,
  ): ApprovalView {
    const same = (r: ApprovalRequest) =>
      r.kind === req.kind && r.project === req.project && (req.kind === 'forget' ? r.tenant === req.tenant : r.session === req.session);
    const waiting = [...waiters.values()].find((w) => same(w.request));
    if (waiting) return viewOf(waiting.request);
    if (waiters.size >= APPROVAL_BOUNDS.pendingMax)
      throw new BerthError('BUSY', 'too many requests wait for an answer; ask again later', { retry_after: 60 });
    const { timeoutSeconds, ...fields } = req;
    const request = hold({ ...fields, run: '', approver: 'operator' }, timeoutSeconds, undefined, (a) => {
      try {
        told(a);
      } catch (err) {
        deps.logger.warn({ err: String(err).slice(0, 200) }, `could not tell the chat about its ${req.kind} request`);
      }
    });
    deps.logger.info(
      { id: request.id, project: req.project, tenant: req.tenant, session: req.session, target: req.target },
      `${what}: berth approvals allow ${request.id} (or deny)`,
    );
    return viewOf(request);
  }

  return {
    async request(run, target, kind = 'egress') {
      const state = stateOf(run.runId);
      if (state.allowed.has(target)) return { allowed: true };
      const denied = state.denied.get(target);
      if (denied) return { allowed: false, reason: denied };
      if (deps.sessionHosts(run.project, run.session).includes(target)) {
        state.allowed.add(target);
        return { allowed: true };
      }
      // Connections to one host wait on one question.
      let verdict = state.waiting.get(target);
      if (!verdict) {
        verdict = ask(run, state, target, kind).finally(() => state.waiting.delete(target));
        state.waiting.set(target, verdict);
      }
      return verdict;
    },

    answer(id, decision, by) {
      // Its request, wherever it waits (a CLI answers for the serving process through the store).
      const request = waiters.get(id)?.request ?? deps.store.get(id);
      if (!request || (!by.operator && (request.project !== by.project || request.tenant !== by.tenant))) {
        throw new BerthError(
          'APPROVAL_NOT_FOUND',
          'nothing of that id waits for your answer (answered already, timed out, or its run ended)',
        );
      }
      if (!by.operator && request.approver === 'operator') {
        throw new BerthError(
          'PERMISSION_DENIED',
          'only the operator may answer this request (the project\'s chat.approvals is "operator")',
          { rule: 'approver' },
        );
      }
      if (!deps.store.answer(id, { decision, by: by.actor, at: new Date().toISOString() })) {
        throw new BerthError('APPROVAL_NOT_FOUND', 'that request was answered already');
      }
      const standing = deps.store.answerOf(id);
      if (standing) settle(id, standing); // a request of another process: it reads the answer within ANSWER_POLL_MS
      return viewOf(request);
    },

    pending(filter = {}) {
      return deps.store
        .list()
        .filter(
          (r) =>
            (filter.project === undefined || r.project === filter.project) && (filter.tenant === undefined || r.tenant === filter.tenant),
        )
        .map(viewOf);
    },

    requestLevel({ level, ...req }, told) {
      return askOperator({ kind: 'level', ...req, target: level }, told, `a chat user asks for level ${level}`);
    },

    requestForget(req, told) {
      return askOperator({ kind: 'forget', ...req, target: 'everything berth keeps of them' }, told, 'a chat user asks to be forgotten');
    },

    requestBudget(req, listen) {
      if (waiters.size >= APPROVAL_BOUNDS.pendingMax)
        return Promise.resolve({ decision: 'deny', by: 'berth', at: new Date(now()).toISOString() });
      return new Promise<ApprovalAnswer>((resolve) => {
        const { timeoutSeconds, ...fields } = req;
        const request = hold({ kind: 'budget', ...fields, run: '' }, timeoutSeconds, undefined, resolve, listen);
        deps.logger.info(
          { id: request.id, project: req.project, tenant: req.tenant, approver: req.approver },
          req.approver === 'operator'
            ? `a chat message waits at its tenant's daily model budget: berth approvals allow ${request.id} (or deny)`
            : "a chat message waits for its person to allow going past the day's model budget",
        );
        listen({ type: 'asked', approval: viewOf(request) });
      });
    },

    endRun(runId) {
      denyWaiting(runId);
      runs.delete(runId);
    },
  };
}
