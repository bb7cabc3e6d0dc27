import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import { admissionLimitsOf } from '../config/runs.js';
import type { PermissionLevel } from '../config/session.js';
import { BerthError, isBerthError, type ErrorCode } from '../errors.js';
import { withActor } from '../admin/audit-trail.js';
import { ownerAlive } from '../runs/process-owner.js';
import type { RunView } from '../admin/views.js';
import { progressSentence, type ProgressStep, type ProgressUpdate } from '../runs/agent-progress.js';
import { RUN_STEPS_MAX } from '../store/run-log.js';
import { LOST_WARNING, STOPPED_WARNING } from '../runs/run-halt.js';
import { own } from '../own.js';
import type { Inbox, InboxEntry } from '../store/inbox.js';
import type { ReplyParts } from '../store/chat-transcripts.js';
import type { ApprovalDecision, ApprovalEvent, ApprovalView } from '../store/approvals.js';
import type { Approvals } from '../outbound/approvals.js';
import { approvalAnswerOf, approvalOutcome, approvalQuestion, levelAsker } from './approval-words.js';
import { chatFailure } from './chat-words.js';
import { collectOutput } from './reply-output.js';
import { chatCommand, NOTHING_ASKED, type CommandContext } from './commands.js';
import { createLanes, type LaneKey, type LaneLimits, type Slot } from './lanes.js';
import type { BridgeState } from '../store/bridge-state.js';
import type { ChannelMessage, ChannelSender, SendAbout } from '../channels/contract.js';

/**
 * The bridge core: what every chat transport shares. A message is journaled (durable inbox)
 * before the transport acknowledges it or anything runs; it then waits in its chat's lane
 * (one at a time per chat; a run slot only once its run is admitted, round-robin by tenant), is
 * answered by a chat command or a run of the project's agent in that chat's session, and ends
 * replied or failed — with the sender told either way (also when the session they picked was
 * deleted, or their login ended, while it waited: it is then not run). A sender nobody approved runs nothing:
 * only the start of what they said is journaled, and they hear one refusal per hour. A channel
 * (channels/) only turns its wire format into ChannelMessages and sends text back.
 */
export interface InboundMessage extends ChannelMessage {
  /** A transport where the person picks the conversation (web chat): its session id, else the chat's own. */
  session?: string;
  /** …and the level the person asked for (the transport applies it by the /level rule when it takes the message; journaled). */
  level?: PermissionLevel;
}

/** A channel's sending side (channels/contract.ts), and what the web chat adds to it. */
export interface ChatTransport extends Omit<ChannelSender, 'send'> {
  /** `reply`: a message's answer, with the agent's steps on the way to it and its output in order (web chat), and which message it answers. */
  send(chat: string, text: string, reply?: ReplyParts & SendAbout): Promise<void>;
  /** The agent's plain output as it is printed (web chat streams it; Signal shows typing instead). */
  output?(chat: string, stream: 'stdout' | 'stderr', chunk: string): void;
  /** The agent at work, live: its tool calls as they start and end, its words between them (web chat). Without it: one progress message for a long run. */
  progress?(chat: string, update: ProgressUpdate): void;
  /** The project a chat belongs to, when the transport knows it (web chat: its login's); else channel profiles decide. */
  projectOf?(chat: string): string | undefined;
  /** /new where the person picks conversations (web chat): the transport makes the session and shows it. */
  newSession?(chat: string): string;
  /** The message has ended, answered or failed (web chat: its connection may send the next). */
  finished?(id: string, chat: string): void;
  /** The run asks its person (a card with its answers, web chat); without it: a question answered by /yes or /no. */
  approval?(chat: string, event: ApprovalEvent): void;
}

export interface BridgeCore {
  /** A message arrived; resolves once it is journaled (or known as a re-delivery). */
  receive(message: InboundMessage): 'accepted' | 'duplicate';
  /**
   * At startup: answer what a dead berth journaled but never started; tell senders of runs it cut
   * off. `heldOnly`: a bridge restarted in this process (the one before answers its own): only the
   * strangers' held first messages are taken over.
   */
  recover(opts?: { heldOnly?: boolean }): void;
  /** Every accepted message has ended (for tests and shutdown). */
  idle(): Promise<void>;
  /** The bridge stops: held first messages are no longer watched here (the next start holds them again). */
  close(): void;
}

export interface BridgeDeps {
  transport: ChatTransport;
  inbox: Inbox;
  state: BridgeState;
  admin: AdminService;
  config: () => BerthConfig;
  logger: Logger;
  /** This berth process (its process identity, "<pid>.<start time>.<boot>"), recorded on each message it takes. */
  owner?: string;
  /** Sender allowed to talk at all (pairing, allowlist). */
  senderAllowed: (sender: string) => boolean;
  /**
   * Asked again when a message's turn comes and right before its run starts (web chat: the login
   * that sent it still holds). False: it ends failed, unrun, and the sender is told.
   */
  stillAllowed?: (message: { id: string; chat: string; sender: string }) => boolean;
  /** A stranger the operator turned away: their held first message is dropped, unrun. */
  senderDenied?: (sender: string) => boolean;
  /** Where a person's /yes and /no go (a run's request to reach a host outside the allowlist). */
  approvals?: Pick<Approvals, 'answer' | 'requestLevel'>;
}

export function createBridgeCore(deps: BridgeDeps): BridgeCore {
  const { transport, inbox, logger } = deps;
  const lanes = createLanes(() => laneLimitsOf(deps.config()));
  const log = logger.child({ bridge: transport.name });

  const say = async (chat: string, text: string, reply?: ReplyParts & SendAbout) => {
    try {
      await transport.send(chat, text, reply);
    } catch (err) {
      log.warn({ err: String(err) }, 'could not send to the chat');
      throw err;
    }
  };

  /** The project (and workflow) answering a chat: the transport's own, else its channel profiles ("<name>:<chat>", then "<name>", unless the channel names them). */
  function profileFor(chat: string): { project: string; workflow?: string } | undefined {
    const project = transport.projectOf?.(chat);
    if (project !== undefined) return { project };
    const channels = deps.config().channels;
    for (const key of transport.profileKeys?.(chat) ?? [`${transport.name}:${chat}`, transport.name]) {
      const profile = own(channels, key);
      if (profile) return profile;
    }
    return undefined;
  }

  type Work = Required<Pick<InboxEntry, 'id' | 'chat' | 'sender' | 'text'>> & Pick<InboxEntry, 'session' | 'level'>;

  async function handle(entry: Work, tenant: string, slot: Slot, told: { queued: boolean }) {
    const profile = profileFor(entry.chat);
    if (!profile) {
      await fail(entry.id, entry.chat, 'no channel profile', `berth: this bot is not set up to answer here yet (no "${transport.name}" channel in berth.yaml).`);
      return;
    }
    const stale = lapsed(entry, profile.project, tenant);
    if (stale) {
      await fail(entry.id, entry.chat, stale.reason, stale.notice);
      return;
    }
    // A group chat is a team tenant; who writes in it is a member (the gateway's team folders follow).
    if (tenant !== entry.sender) await joinTeam(profile.project, tenant, entry.sender);
    const ctx: CommandContext = {
      admin: deps.admin,
      project: profile.project,
      tenant,
      sender: entry.sender,
      sessionId: entry.session ?? chatSessionId(transport.name, entry.chat, deps.state.generation(entry.chat)),
      newSession: () => transport.newSession?.(entry.chat) ?? chatSessionId(transport.name, entry.chat, deps.state.nextGeneration(entry.chat)),
    };
    ctx.askRaise = levelAsker(deps.approvals, ctx, (text) => void say(entry.chat, text).catch(() => undefined));
    const command = chatCommand(entry.text);
    let reply: string;
    let parts: ReplyParts | undefined;
    if (command) {
      reply = await command(ctx).catch((err: unknown) => `berth: ${isBerthError(err) ? err.message : 'that command failed'}`);
    } else {
      const typing = startTyping(entry.chat);
      // A workflow is several runs: one refused midway must not run its earlier steps again.
      const single = profile.workflow === undefined;
      // 'started' only once its run may start: until then a restart answers it afresh (nothing of it ran).
      let started = false;
      const start = () => {
        if (!started) inbox.mark(entry.id, 'started', { reason: undefined });
        started = true;
      };
      // Asked again where waiting ends: a run opens its session (making a missing one), then waits
      // for admission and its slot; the person may have deleted it or been logged out meanwhile.
      let stopped: Lapsed | undefined;
      const recheck = () => {
        stopped = lapsed(entry, profile.project, tenant);
        if (stopped) throw new BerthError(stopped.code, stopped.reason);
      };
      // A message's run takes its slot once admitted and holding its workspace (see lanes.ts).
      const ready = async () => {
        await slot.take(() => {
          if (told.queued) return;
          told.queued = true;
          void say(entry.chat, 'berth: queued; I will answer as soon as I can.').catch(() => undefined);
        });
        recheck();
        start();
      };
      try {
        const run = async () => {
          recheck(); // in the same tick as the runner opening the session
          return runFor(ctx, profile.workflow, entry.text, entry.chat, profile.workflow === undefined ? ready : start);
        };
        ({ text: reply, ...parts } = await (single ? whenAdmitted(run) : run()));
      } catch (err) {
        const lapsedMeanwhile = stopped as Lapsed | undefined;
        if (lapsedMeanwhile) {
          await fail(entry.id, entry.chat, lapsedMeanwhile.reason, lapsedMeanwhile.notice);
          return;
        }
        if (single && isBerthError(err, 'SHUTTING_DOWN')) {
          // Its run never started: the next berth answers it (recover() re-queues 'received').
          inbox.mark(entry.id, 'received', { reason: 'berth was stopping; it is answered after the restart' });
          return;
        }
        const reason = isBerthError(err) ? `${err.code}: ${err.message}` : 'internal error';
        log.warn({ id: entry.id, reason }, 'chat run failed');
        await fail(entry.id, entry.chat, reason, chatFailure(preview(entry.text), err));
        return;
      } finally {
        typing.stop();
        slot.release(); // the reply may take a while to send: the slot is for runs
      }
    }
    inbox.mark(entry.id, 'answered', { reply });
    await deliver(entry.id, entry.chat, reply, undefined, parts);
  }

  type Lapsed = { code: ErrorCode; reason: string; notice: string };

  /** Why a message taken from its lane may no longer run: its sender was logged out, or the session they picked is gone. */
  function lapsed(entry: Work, project: string, tenant: string): Lapsed | undefined {
    if (deps.stillAllowed && !deps.stillAllowed(entry)) {
      return { code: 'UNAUTHORIZED', reason: 'its sender was logged out before it ran', notice: `berth: you were logged out before your message "${preview(entry.text)}" ran; it was not run.` };
    }
    if (entry.session !== undefined && !sessionStillThere(project, entry.session, tenant)) {
      return { code: 'SESSION_NOT_FOUND', reason: 'its session was deleted before it ran', notice: `berth: that conversation was deleted; your message "${preview(entry.text)}" was not run.` };
    }
    return undefined;
  }

  /** The session the person picked is there and still theirs. Any other trouble is the run's to report. */
  function sessionStillThere(project: string, id: string, tenant: string): boolean {
    try {
      return deps.admin.getSession(project, id).tenant_key === tenant;
    } catch (err) {
      if (isBerthError(err, 'SESSION_NOT_FOUND') || isBerthError(err, 'CONFIG_INVALID')) return false;
      return true;
    }
  }

  /**
   * A chat message is already journaled: a full run queue (BUSY) makes it wait its Retry-After
   * and try again (a few times, about ten minutes at most) instead of failing at once.
   */
  async function whenAdmitted<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (!isBerthError(err, 'BUSY') || attempt >= BUSY_ATTEMPTS) throw err;
        await new Promise((r) => setTimeout(r, (err.details.retry_after ?? 5) * 1000));
      }
    }
  }

  /** Add a group's sender to the project's team of that group, once (an admin may edit the list later). */
  async function joinTeam(project: string, team: string, member: string) {
    try {
      if (own(deps.admin.getProject(project).teams, team)?.members.includes(member)) return;
      let joined = false;
      // Read and written under the project lock: two groups' first messages, or an admin's edit, lose nothing.
      await deps.admin.updateProject(project, (current) => {
        const members = own(current.teams, team)?.members ?? [];
        if (members.includes(member)) return {};
        joined = true;
        return { teams: { ...current.teams, [team]: { members: [...members, member] } } };
      });
      if (joined) log.info({ project, team, member }, 'group member joined its team');
    } catch (err) {
      log.warn({ err: String(err).slice(0, 200), team }, 'could not record a group member');
    }
  }

  /**
   * Send what was journaled as the answer. `failure`: it is the notice of a failure, and the
   * message ends failed with that reason once the sender has been told — so a berth killed in
   * between tells them after its restart, instead of ending the message in silence.
   */
  async function deliver(id: string, chat: string, reply: string, failure?: string, parts?: ReplyParts) {
    try {
      await say(chat, reply, { ...parts, answerTo: id });
      transport.answered?.(id, chat, reply);
      inbox.mark(id, failure === undefined ? 'replied' : 'failed', { reason: failure });
    } catch (err) {
      inbox.mark(id, 'failed', { reason: `${failure ? `${failure}; ` : ''}the reply could not be sent: ${String(err).slice(0, 200)}` });
    }
  }

  /** A message that will not be answered: journal the notice first, then tell the sender. */
  async function fail(id: string, chat: string, reason: string, notice: string) {
    inbox.mark(id, 'answered', { reply: notice, reason });
    await deliver(id, chat, notice, reason);
  }

  /** `ready`: called when the run may start (a message's, by the runner once admitted; a workflow's, first). */
  async function runFor(ctx: CommandContext, workflow: string | undefined, text: string, chat: string, ready: () => void | Promise<void>): Promise<{ text: string } & ReplyParts> {
    if (workflow) {
      // No lane slot: its steps wait for admission one by one, and a slot held meanwhile could wait
      // on runs that wait for it. Admission bounds them per tenant; the lane keeps them one per chat.
      await ready();
      const run = await deps.admin.runWorkflow(ctx.project, workflow, text);
      const last = run.steps.at(-1);
      return { text: run.status === 'succeeded' ? last?.stdout.trim() || 'done' : `berth: workflow ${workflow} ${run.status}${last ? `: ${(last.stderr || last.stdout).trim().slice(0, 500)}` : ''}` };
    }
    const decoder = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    // Where output is shown live (web chat), the reply keeps it in order too, stdout and stderr apart.
    const printed = transport.output ? collectOutput() : undefined;
    const onOutput = transport.output
      ? (stream: 'stdout' | 'stderr', chunk: Buffer) => {
          const text = decoder[stream].decode(chunk, { stream: true });
          printed?.push(stream, text);
          transport.output?.(chat, stream, text);
        }
      : undefined;
    // The level was set (by the /level rule) when the message was taken; the run uses the session's
    // level as it is now, so a level an admin lowered meanwhile is not raised again by a queued message.
    const watch = watchProgress(chat);
    const onApproval = (event: ApprovalEvent) => (transport.approval ? transport.approval(chat, event) : askInChat(chat, event));
    const run = await deps.admin
      .runMessage(ctx.project, { user: ctx.tenant, message: text, session: ctx.sessionId, onOutput, onProgress: watch.onProgress, onApproval, whenReady: async () => ready() })
      .finally(watch.stop);
    const output = printed?.segments();
    return {
      text: replyText(run),
      ...(run.steps ? { steps: run.steps } : {}),
      // Only a run that wrote to stderr needs its order kept; its exit status is shown when not 0.
      ...(output?.some((o) => o.stream === 'stderr') ? { output, ...(run.exit_code !== 0 ? { exit: run.exit_code } : {}) } : {}),
    };
  }

  /** A run's answer as the chat shows it: what the agent said, and why it ended if not on its own. */
  function replyText(run: RunView): string {
    const out = run.stdout.trim();
    if (run.timed_out) return `${out}\n\n[berth: stopped after the time limit]`.trim();
    // Stopped by berth for a reason of its own (disk limit, an unreachable model service): say it.
    const stopped = run.warnings.find((w) => w.startsWith(STOPPED_WARNING));
    if (stopped) return `${out}${out ? '\n\n' : ''}[berth stopped the agent: ${stopped.slice(STOPPED_WARNING.length)}]`;
    const lost = run.warnings.find((w) => w.startsWith(LOST_WARNING));
    if (lost) return `${out}${out ? '\n\n' : ''}[the agent's container ended before it finished: ${lost.slice(LOST_WARNING.length)}]`;
    if (run.exit_code !== 0) return `${out}${out ? '\n\n' : ''}[exit ${run.exit_code}]${run.stderr.trim() ? `\n${run.stderr.trim().slice(-1500)}` : ''}`;
    return out || '(no output)';
  }

  /**
   * The agent at work: live where the transport shows it (web chat); elsewhere (Signal) one short
   * message once the agent has worked progress_message_after_seconds since its first step, never
   * more: typing says the rest (an agent whose output has no steps gets typing alone).
   */
  function watchProgress(chat: string): { onProgress?: (u: ProgressUpdate) => void; stop: () => void } {
    if (transport.progress) return { onProgress: (u) => transport.progress?.(chat, u), stop: () => undefined };
    const after = deps.config().bridges.progress_message_after_seconds;
    if (after <= 0) return { stop: () => undefined };
    const steps = new Map<string, ProgressStep>();
    // Counted from the agent's first step (its container is up and it works), not from a queue
    // or a container start: what the message then says is the work so far.
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    return {
      onProgress(u) {
        if (u.type === 'step' && (steps.has(u.step.id) || steps.size < RUN_STEPS_MAX)) steps.set(u.step.id, u.step);
        if (timer || stopped) return;
        timer = setTimeout(() => void say(chat, `berth: still working (${progressSentence([...steps.values()])})`).catch(() => undefined), after * 1000);
        timer.unref();
      },
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  // Questions a run asked in a chat without cards (Signal), oldest first: /yes and /no answer the first.
  const asked = new Map<string, ApprovalView[]>();

  /** A run's request, as a question in the chat; the answer (/yes, /no) comes outside the chat's lane, which the run holds. */
  function askInChat(chat: string, event: ApprovalEvent) {
    if (event.type === 'asked') {
      const a = event.approval;
      asked.set(chat, [...(asked.get(chat) ?? []), a]);
      void say(chat, approvalQuestion(a)).catch(() => undefined);
      return;
    }
    const left = (asked.get(chat) ?? []).filter((a) => a.id !== event.id);
    const answered = asked.get(chat)?.find((a) => a.id === event.id);
    if (left.length) asked.set(chat, left);
    else asked.delete(chat);
    // A person's own /yes or /no is confirmed by its reply; the rest is told here.
    if (answered && (event.by === 'timeout' || event.by === 'operator')) void say(chat, approvalOutcome(answered, event)).catch(() => undefined);
  }

  /** /yes, /yes session, /no: answered at once (never queued behind the run that waits for it), once. */
  function answerInChat(m: InboundMessage, decision: ApprovalDecision) {
    const waiting = asked.get(m.chat)?.[0];
    let reply: string;
    if (!waiting || !deps.approvals) reply = NOTHING_ASKED;
    else {
      try {
        deps.approvals.answer(waiting.id, decision, { actor: `tenant:${m.sender}`, project: waiting.project, tenant: m.tenant });
        reply = approvalOutcome(waiting, { decision });
      } catch (err) {
        reply = `berth: ${isBerthError(err) ? err.message : 'that answer could not be taken'}`;
      }
    }
    inbox.mark(m.id, 'answered', { reply });
    void deliver(m.id, m.chat, reply);
  }

  /** A chat's typing indicator fades (Signal's after 15 s): refresh it while the agent works. */
  function startTyping(chat: string) {
    const tick = () => void transport.typing(chat, true).catch(() => undefined);
    tick();
    const timer = setInterval(tick, transport.typingEveryMs ?? 10_000);
    timer.unref();
    return {
      stop() {
        clearInterval(timer);
        void transport.typing(chat, false).catch(() => undefined);
      },
    };
  }

  function enqueue(entry: Work, tenant: string) {
    const told = { queued: false };
    let turn = false;
    const queued = lanes.run({ chat: entry.chat, tenant, sender: entry.sender }, (slot) => {
      turn = true;
      // What a chat message does is the sender's doing, in the audit log too.
      return withActor(`tenant:${entry.sender}`, entry.id, () => handle(entry, tenant, slot, told))
        .catch((err) => log.error({ err: String(err), id: entry.id }, 'chat message failed'))
        .finally(() => transport.finished?.(entry.id, entry.chat));
    });
    if (!queued.accepted) {
      // Journaled already: it ends failed, and the sender is told it was not run.
      log.warn({ id: entry.id, full: queued.full }, 'chat message refused: too many waiting');
      void fail(entry.id, entry.chat, `too many messages waiting (${queued.full})`, refusedNotice(queued.full, entry.text)).finally(() => transport.finished?.(entry.id, entry.chat));
      return;
    }
    // Only this chat's own messages are counted: never how many other people's wait. Said only
    // if it still waits after a moment: the one ahead may be no more than its reply being sent.
    if (queued.ahead > 0) {
      const { ahead } = queued;
      setTimeout(() => {
        if (turn || told.queued) return;
        told.queued = true;
        void say(entry.chat, `berth: queued (${ahead} of your messages in this chat ahead of it); I will answer in order.`).catch(() => undefined);
      }, QUEUED_NOTICE_AFTER_MS).unref();
    }
  }

  /**
   * A sender nobody approved: nothing runs. The operator is told once per new sender. Their first
   * message (whole, if short enough) is held and answered once they are approved; otherwise they
   * hear one refusal per hour (Signal rate-limits the bot, not them); later messages end without one.
   */
  function refuseStranger(m: { id: string; chat: string; sender: string; text: string; senderName?: string }, tenant: string, whole: boolean) {
    const seen = deps.state.noteStranger(m.sender, m.senderName, new Date(), STRANGER_REPLY_EVERY_MS);
    if (seen.first) log.info({ sender: m.sender, name: m.senderName?.slice(0, 64) }, `a new sender waits for approval (berth bridge approve ${m.sender})`);
    // Their first message is kept, whole, and answered once they are approved.
    if (seen.first && whole) {
      inbox.mark(m.id, 'held', { reason: 'sender not approved yet: answered once the operator approves them' });
      hold({ id: m.id, chat: m.chat, sender: m.sender, text: m.text }, tenant);
      void say(m.chat, STRANGER_HELD_NOTICE).catch(() => undefined);
      return;
    }
    if (seen.reply) void fail(m.id, m.chat, 'sender not approved', STRANGER_NOTICE);
    else inbox.mark(m.id, 'failed', { reason: 'sender not approved (refused already this hour: no reply)' });
  }

  // Strangers' first messages held for the operator's approval (at most bridge-state's MAX_PENDING:
  // one per pending sender), and a check every HELD_CHECK_MS while any wait: approval may come from
  // another process (the CLI), so it is read, not told.
  const held = new Map<string, { work: Work; tenant: string }>();
  let heldTimer: NodeJS.Timeout | undefined;
  function hold(work: Work, tenant: string) {
    held.set(work.id, { work, tenant });
    heldTimer ??= setInterval(releaseApproved, HELD_CHECK_MS);
    heldTimer.unref();
  }
  function releaseApproved() {
    for (const [id, { work, tenant }] of held) {
      if (deps.senderDenied?.(work.sender)) {
        held.delete(id);
        inbox.mark(id, 'failed', { reason: 'its sender was turned away by the operator: not run, not answered' });
        continue;
      }
      if (!deps.senderAllowed(work.sender)) continue;
      held.delete(id);
      log.info({ id, sender: work.sender }, 'a held first message is answered: its sender was approved');
      inbox.mark(id, 'received', { reason: 'its sender was approved' });
      enqueue(work, tenant);
    }
    if (held.size === 0 && heldTimer) {
      clearInterval(heldTimer);
      heldTimer = undefined;
    }
  }

  return {
    receive(message) {
      const allowed = deps.senderAllowed(message.sender);
      // A stranger's message never runs unapproved: what is kept of it is bounded (a first message
      // up to STRANGER_HELD_CHARS, held for approval; else its start, for the operator).
      const text = allowed || message.text.length <= STRANGER_HELD_CHARS ? message.text : message.text.slice(0, STRANGER_TEXT_CHARS);
      const fresh = inbox.receive({ id: message.id, chat: message.chat, sender: message.sender, text, owner: deps.owner, tenant: message.tenant, session: message.session, level: message.level });
      // Acknowledged only once on disk; a re-delivery is acknowledged again (the first ack may be what was lost).
      void transport.acknowledge(message).catch((err) => log.warn({ err: String(err) }, 'acknowledge failed'));
      if (!fresh) return 'duplicate';
      if (!allowed) {
        refuseStranger({ ...message, text }, message.tenant, text === message.text);
        return 'accepted';
      }
      const decision = approvalAnswerOf(message.text);
      if (decision && asked.has(message.chat)) {
        answerInChat(message, decision);
        return 'accepted';
      }
      enqueue({ id: message.id, chat: message.chat, sender: message.sender, text: message.text, session: message.session, level: message.level }, message.tenant);
      return 'accepted';
    },

    recover(opts = {}) {
      for (const entry of inbox.open()) {
        if (opts.heldOnly && entry.phase !== 'held') continue;
        // Another live berth of this home (a serve beside a bridge) is still answering it.
        if (entry.owner !== undefined && entry.owner !== deps.owner && ownerAlive(entry.owner)) continue;
        if (entry.chat === undefined || entry.sender === undefined || entry.text === undefined) {
          inbox.mark(entry.id, 'failed', { reason: 'journal entry incomplete' });
          continue;
        }
        const e = { id: entry.id, chat: entry.chat, sender: entry.sender, text: entry.text, session: entry.session, level: entry.level };
        const lane: LaneKey = { chat: entry.chat, tenant: entry.tenant ?? entry.sender, sender: entry.sender };
        if (entry.phase === 'held') {
          // A stranger's first message: answered once they are approved (now, if they were meanwhile).
          hold(e, entry.tenant ?? entry.sender);
        } else if (entry.phase === 'received' && !deps.senderAllowed(entry.sender)) {
          // A stranger's message a dead berth journaled but never refused: it is refused now, never run.
          refuseStranger(e, entry.tenant ?? entry.sender, false); // its text may be the cut one
        } else if (entry.phase === 'received') {
          log.info({ id: entry.id }, 'answering a message a previous berth journaled');
          enqueue(e, entry.tenant ?? entry.sender);
        } else if (entry.phase === 'answered' && entry.reply !== undefined) {
          void lanes.run(lane, () => deliver(entry.id, e.chat, entry.reply as string, entry.reason), { bounded: false });
        } else {
          // Its run had started: running it again could do twice what the agent did once.
          const notice = `berth: I restarted while working on your message "${preview(e.text)}". It was not finished; please send it again.`;
          inbox.mark(entry.id, 'answered', { reply: notice, reason: 'berth restarted while this message was running' });
          void lanes.run(lane, () => deliver(entry.id, e.chat, notice, 'berth restarted while this message was running'), { bounded: false });
        }
      }
      releaseApproved();
    },

    idle: () => lanes.idle(),

    close() {
      held.clear();
      clearInterval(heldTimer);
      heldTimer = undefined;
    },
  };
}

const BUSY_ATTEMPTS = 10;

/** Messages one chat may have waiting or running; one tenant across its chats (and one sender across theirs and their groups); a whole bridge. */
export const CHAT_PENDING_MAX = 20;
/** A message that waits behind the chat's own for this long is told it is queued. */
export const QUEUED_NOTICE_AFTER_MS = 1000;
export const TENANT_PENDING_MAX = 50;
export const BRIDGE_PENDING_MAX = 500;
/** What is kept of an unapproved sender's message (it never runs), and how often they hear a refusal. */
export const STRANGER_TEXT_CHARS = 200;
export const STRANGER_REPLY_EVERY_MS = 60 * 60 * 1000;
export const STRANGER_NOTICE = 'berth: this bot does not know you yet. The operator has been asked to approve you; you will get a message when you can talk.';
/** What a stranger hears of their first message, which is kept: answered once they are approved. */
export const STRANGER_HELD_NOTICE = 'berth: this bot does not know you yet. The operator has been asked to approve you; your message is kept and answered as soon as they do.';
/** The longest first message of a stranger that is kept for after their approval (longer: refused, to be sent again). */
export const STRANGER_HELD_CHARS = 4000;
/** How often held first messages are checked for their sender's approval. */
export const HELD_CHECK_MS = 2000;
/** Sent (by `berth bridge approve`) to a sender who waited. */
export const APPROVED_NOTICE = 'berth: the operator approved you: you can talk to this bot now (/help lists what it understands).';
/** The same, to a sender whose first message was kept. */
export const APPROVED_HELD_NOTICE = 'berth: the operator approved you: your first message is being answered (/help lists what this bot understands).';

/** The lanes' bounds: berth.yaml's bridges.max_concurrent_runs run slots, at most runs.per_tenant of them per tenant and per sender. */
export function laneLimitsOf(config: BerthConfig): LaneLimits {
  const slots = config.bridges.max_concurrent_runs;
  return { slots, perTenant: Math.min(slots, admissionLimitsOf(config).perTenant), chatPending: CHAT_PENDING_MAX, tenantPending: TENANT_PENDING_MAX, totalPending: BRIDGE_PENDING_MAX };
}

function refusedNotice(full: 'chat' | 'tenant' | 'sender' | 'bridge', text: string): string {
  const again = 'Send it again once I have answered the others.';
  if (full === 'chat') return `berth: ${CHAT_PENDING_MAX} of your messages in this chat are waiting already, so "${preview(text)}" was not run. ${again}`;
  if (full === 'tenant' || full === 'sender') return `berth: ${TENANT_PENDING_MAX} of your messages are waiting already, so "${preview(text)}" was not run. ${again}`;
  return `berth: I am too busy to take more messages right now, so "${preview(text)}" was not run. Please send it again in a few minutes.`;
}

function preview(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** A stable session id for a chat and its generation (/new starts the next). */
export function chatSessionId(bridge: string, chat: string, generation: number): string {
  return `chat-${createHash('sha256').update(`${bridge}\0${chat}`).digest('hex').slice(0, 20)}-${generation}`;
}
