import type { Logger } from 'pino';
import { withActor } from '../admin/audit-trail.js';
import type { AdminService } from '../admin/service.js';
import type { SendAbout } from '../channels/contract.js';
import type { BerthConfig } from '../config/berth-config.js';
import { BerthError, isBerthError } from '../base/errors.js';
import type { Approvals } from '../outbound/approvals.js';
import type { ApprovalEvent } from '../store/approvals.js';
import type { BridgeState } from '../store/bridge-state.js';
import { BY_BERTH, type ReplyParts } from '../store/chat-transcripts.js';
import type { DeliveryStep, Inbox } from '../store/inbox.js';
import type { Metrics } from '../base/metrics.js';
import { approvalAnswerOf, levelAsker } from './approval-words.js';
import { createChatQuestions } from './chat-approvals.js';
import type { ChatTransport, InboundMessage, JournaledMessage } from './chat-transport.js';
import { chatFailure } from './chat-words.js';
import { createDeliver } from './deliver.js';
import { deliverRunFiles, fetchAttachments, FILES_ONLY, outFilesDeps, ranFilesOf, sayPlain, WORKFLOW_TAKES_NO_FILES } from './files.js';
import type { RanFiles } from './files.js';
import { joinTeam } from './teams.js';
import { chatConversations, chatSessionId, routeOf, whenAdmitted, type Lapsed } from './chat-conversations.js';
import type { IncomingFile } from '../plan/files-in.js';
import type { DeliveryBounds } from './delivery-policy.js';
import { chatCommand, type CommandAdmin, type CommandContext } from './commands.js';
import type { PersonChat } from './person-commands.js';
import { createLanes, laneLimitsOf, type LaneKey, type Slot } from './lanes.js';
import { startTyping, watchProgress } from './progress.js';
import { recoverInbox } from './recover.js';
import { collectOutput } from './reply-output.js';
import { preview, refusedNotice, replyText } from './reply-words.js';
import { createStrangers, keptText } from './strangers.js';
import type { ScheduleService } from '../admin/schedules.js';
import { jobsReply, type JobsAdmin } from './jobs.js';
import type { ChatCost } from './chat-cost.js';
import { scheduledReply, scheduleOfMessage, type ScheduledMessage } from './scheduled.js';

/**
 * The bridge core: what every chat transport shares. A message is received (journaled in the
 * durable inbox before the transport acknowledges it or anything runs), enqueued in its chat's
 * lane (one at a time per chat; a run slot only once its run is admitted, round-robin by tenant),
 * handled by a chat command or a run of the project's agent in that chat's session, and delivered:
 * it ends replied or failed, with the sender told either way (also when the session they picked
 * was deleted, or their login ended, while it waited: it is then not run). Beside that flow, each
 * in its own file: strangers (pairing), a run's questions in the chat, progress and typing,
 * recovery at startup, and the words the chat reads. A channel (channels/) only turns its wire
 * format into messages and sends text back.
 */
export interface BridgeCore {
  /** A message arrived; resolves once it is journaled (or known as a re-delivery). */
  receive(message: InboundMessage): 'accepted' | 'duplicate';
  /**
   * A scheduled run's message, with no incoming one (runs/scheduler.ts): journaled in the inbox under its firing's id (a
   * second post of it is a duplicate, never a second run), then answered as the person's message and its answer posted to
   * the chat, marked as scheduled. 'refused': its sender may no longer write here.
   */
  post(message: ScheduledMessage): 'accepted' | 'duplicate' | 'refused';
  /** At startup: see recover.ts. `heldOnly`: a bridge restarted in this process takes over only the strangers' held first messages. */
  recover(opts?: { heldOnly?: boolean }): void;
  /** Every accepted message has ended (for tests and shutdown). */
  idle(): Promise<void>;
  /** The bridge stops: held first messages are no longer watched here (the next start holds them again). */
  close(): void;
}

/** What the core asks of the admin service: chat commands, a group's team, runs. */
export type CoreAdmin = CommandAdmin & Pick<AdminService, 'updateProject' | 'runMessage' | 'runWorkflow' | 'runFile'>;

export interface BridgeDeps {
  transport: ChatTransport;
  inbox: Inbox;
  state: BridgeState;
  admin: CoreAdmin;
  config: () => BerthConfig;
  logger: Logger;
  /** This berth process (its process identity, "<pid>.<start time>.<boot>"), recorded on each message it takes. */
  owner?: string;
  /** Sender allowed to talk at all (pairing, allowlist). */
  senderAllowed: (sender: string) => boolean;
  /** Asked again when a message's turn comes and right before its run starts (web chat: the login still holds). False: it ends failed, unrun, and the sender is told. */
  stillAllowed?: (message: { id: string; chat: string; sender: string }) => boolean;
  /** A stranger the operator turned away: their held first message is dropped, unrun. */
  senderDenied?: (sender: string) => boolean;
  /** Where a person's /yes and /no go (a run's request to reach a host outside the allowlist). */
  approvals?: Pick<Approvals, 'answer' | 'requestLevel'>;
  /** Replies no way of sending delivered are counted here, by channel. */
  metrics?: Pick<Metrics, 'replyUndelivered'>;
  /** The deliver step's waits and clock (tests record the waits instead of sleeping), and its bounds. */
  delivery?: { sleep?: (ms: number) => Promise<void>; now?: () => number; bounds?: DeliveryBounds };
  /** Schedules made in a chat (/every, /at …); without it the chat is told they are not offered. */
  schedules?: ScheduleService;
  /** /jobs and /stop: the person's runs going on now; without it they are unknown commands. */
  jobs?: JobsAdmin;
  /** The cost line, the day's budget hold and /usage (chat-cost.ts); without it none of them. */
  cost?: ChatCost;
  /** /export and /forget (person-commands.ts); without it the chat is told the operator does them. */
  person?: PersonChat;
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
  /** Said by the way (a notice, a question): a failed send is logged by say, and nothing waits on it. */
  const tell = (chat: string, text: string) => void say(chat, text, BY_BERTH).catch(() => undefined);

  const questions = createChatQuestions(deps.approvals, tell);
  const { lapsed, chatSession } = chatConversations({ ...deps, log });
  const strangers = createStrangers({
    state: deps.state,
    inbox,
    log,
    senderAllowed: deps.senderAllowed,
    senderDenied: deps.senderDenied,
    say: tell,
    fail,
    enqueue,
  });

  const profileFor = (chat: string) => routeOf(transport, deps.config().routes, chat);

  function enqueue(entry: JournaledMessage, tenant: string) {
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
      void fail(entry.id, entry.chat, `too many messages waiting (${queued.full})`, refusedNotice(queued.full, entry.text)).finally(() =>
        transport.finished?.(entry.id, entry.chat),
      );
      return;
    }
    // Only this chat's own messages are counted; said only if it still waits after a moment (the one ahead may be its reply).
    if (queued.ahead > 0) {
      const { ahead } = queued;
      setTimeout(() => {
        if (turn || told.queued) return;
        told.queued = true;
        tell(entry.chat, `berth: queued (${ahead} of your messages in this chat ahead of it); I will answer in order.`);
      }, QUEUED_NOTICE_AFTER_MS).unref();
    }
  }

  async function handle(entry: JournaledMessage, tenant: string, slot: Slot, told: { queued: boolean }) {
    const profile = profileFor(entry.chat);
    if (!profile) {
      await fail(
        entry.id,
        entry.chat,
        'no route',
        `berth: this bot is not set up to answer here yet (no "${transport.name}" route in berth.yaml).`,
      );
      return;
    }
    const stale = lapsed(entry, profile.project, tenant);
    if (stale) {
      await fail(entry.id, entry.chat, stale.reason, stale.notice);
      return;
    }
    // A group chat is a team tenant; who writes in it is a member (the gateway's team folders follow).
    if (tenant !== entry.sender) await joinTeam(deps.admin, log, profile.project, tenant, entry.sender);
    const ctx: CommandContext = {
      admin: deps.admin,
      project: profile.project,
      tenant,
      sender: entry.sender,
      sessionId: entry.session ?? chatSession(profile.project, entry.chat, tenant),
      newSession: () =>
        transport.newSession?.(entry.chat) ?? chatSessionId(transport.name, entry.chat, deps.state.nextGeneration(entry.chat)),
      chat: { channel: transport.name, chat: entry.chat, ...(entry.session !== undefined ? { session: entry.session } : {}) },
      schedules: deps.schedules,
      usage: deps.cost && (() => deps.cost?.usage(ctx) ?? ''),
      person: deps.person && { ...deps.person, tell: (text) => tell(entry.chat, text) },
    };
    ctx.askRaise = levelAsker(deps.approvals, ctx, (text) => tell(entry.chat, text));
    // A scheduled run's task is the agent's, never a command.
    const schedule = scheduleOfMessage(entry.id);
    const command = schedule ? undefined : chatCommand(entry.text);
    let reply: string;
    let parts: ReplyParts | undefined = command ? BY_BERTH : undefined;
    let ran: RanFiles | undefined;
    if (command) {
      reply = await command(ctx).catch((err: unknown) => `berth: ${isBerthError(err) ? err.message : 'that command failed'}`);
    } else {
      // Where this conversation's agent schedules answer (its schedule tool).
      deps.schedules?.noteChat(profile.project, ctx.sessionId, { channel: transport.name, chat: entry.chat, sender: entry.sender });
      const typing = startTyping((on) => transport.typing(entry.chat, on), transport.typingEveryMs);
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
          tell(entry.chat, 'berth: queued; I will answer as soon as I can.');
        });
        recheck();
        start();
      };
      try {
        // Fetched once, before the run (not again when it waits for admission), bounded by the project's files settings.
        const files = entry.attachments?.length
          ? await fetchAttachments(transport, entry.attachments, deps.admin.getProjectMetadata(profile.project).files, log)
          : undefined;
        const run = async () => {
          recheck(); // in the same tick as the runner opening the session
          return runFor(ctx, profile.workflow, entry.text, entry.chat, single ? ready : start, files, schedule);
        };
        ({ text: reply, ran, ...parts } = await (single ? whenAdmitted(run) : run()));
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
    if (ran?.notice) await sayPlain(transport, entry.chat, ran.notice, entry.id).catch(() => undefined); // the person's files, before the answer
    if (schedule) reply = scheduledReply(schedule, entry.text, reply);
    inbox.mark(entry.id, 'answered', { reply, ...(ran?.files ? { files: ran.files } : {}) });
    await deliver(entry.id, entry.chat, reply, undefined, parts);
    if (ran?.files) await sendFilesOf(profile.project, entry.chat, entry.id, ran.files);
  }

  /** The agent's files after its answer (files.ts): as files, or as links. */
  const sendFilesOf = (project: string, chat: string, id: string, files: NonNullable<RanFiles['files']>) =>
    deliverRunFiles(outFilesDeps(transport, log, deps.admin, project, deps.config().bridges.public_url), chat, id, project, files);

  /** `ready`: called when the run may start (a message's, by the runner once admitted; a workflow's, first). */
  async function runFor(
    ctx: CommandContext,
    workflow: string | undefined,
    text: string,
    chat: string,
    ready: () => void | Promise<void>,
    files?: IncomingFile[],
    schedule?: string,
  ): Promise<{ text: string; ran?: RanFiles } & ReplyParts> {
    if (workflow) {
      // No lane slot: its steps wait for admission one by one, and a slot held meanwhile could wait
      // on runs that wait for it. Admission bounds them per tenant; the lane keeps them one per chat.
      await ready();
      const run = await deps.admin.runWorkflow(ctx.project, workflow, text);
      const last = run.steps.at(-1);
      return {
        text:
          run.status === 'succeeded'
            ? last?.stdout.trim() || 'done'
            : `berth: workflow ${workflow} ${run.status}${last ? `: ${(last.stderr || last.stdout).trim().slice(0, 500)}` : ''}`,
        ...(files?.length ? { ran: { notice: WORKFLOW_TAKES_NO_FILES } } : {}),
      };
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
    const watch = watchProgress({
      live: transport.progress && ((u) => transport.progress?.(chat, u)),
      afterSeconds: deps.config().bridges.progress_message_after_seconds,
      say: (text) => tell(chat, text),
    });
    const onApproval = (event: ApprovalEvent) => (transport.approval ? transport.approval(chat, event) : questions.ask(chat, event));
    // At the day's budget the message waits here for its approver (asked in words on every channel).
    const held = await deps.cost?.hold(ctx, (event) => questions.ask(chat, event));
    if (held !== undefined) return { text: held };
    const run = await deps.admin
      .runMessage(ctx.project, {
        user: ctx.tenant,
        message: text || FILES_ONLY,
        session: ctx.sessionId,
        onOutput,
        onProgress: watch.onProgress,
        onApproval,
        whenReady: async () => ready(),
        ...(files?.length ? { files } : {}),
        ...(schedule ? { schedule } : {}),
      })
      .finally(watch.stop);
    const output = printed?.segments();
    const cost = deps.cost?.after(ctx, run.run);
    return {
      text: cost ? `${replyText(run)}\n\n${cost}` : replyText(run),
      ...(run.steps ? { steps: run.steps } : {}),
      // Only a run that wrote to stderr needs its order kept; its exit status is shown when not 0.
      ...(output?.some((o) => o.stream === 'stderr') ? { output, ...(run.exit_code !== 0 ? { exit: run.exit_code } : {}) } : {}),
      ...ranFilesOf(run),
    };
  }

  const deliver = createDeliver({ transport, inbox, log, metrics: deps.metrics, ...deps.delivery });

  /** A message that will not be answered: journal the notice first, then tell the sender. */
  async function fail(id: string, chat: string, reason: string, notice: string) {
    inbox.mark(id, 'answered', { reply: notice, reason });
    await deliver(id, chat, notice, reason, BY_BERTH);
  }

  return {
    receive(message) {
      const allowed = deps.senderAllowed(message.sender);
      const text = keptText(message.text, allowed);
      const attachments = message.attachments?.length ? { attachments: message.attachments } : {};
      const fresh = inbox.receive({
        id: message.id,
        chat: message.chat,
        sender: message.sender,
        text,
        owner: deps.owner,
        tenant: message.tenant,
        session: message.session,
        level: message.level,
        ...attachments,
      });
      // Acknowledged only once on disk; a re-delivery is acknowledged again (the first ack may be what was lost).
      void transport.acknowledge(message).catch((err) => log.warn({ err: String(err) }, 'acknowledge failed'));
      if (!fresh) return 'duplicate';
      if (!allowed) {
        strangers.refuse({ ...message, text }, message.tenant, text === message.text);
        return 'accepted';
      }
      // A /yes or /no to a question that waits: answered at once, never queued behind the run that asked.
      const decision = approvalAnswerOf(message.text);
      if (decision && questions.waiting(message.chat)) {
        const reply = questions.answer(message, decision);
        inbox.mark(message.id, 'answered', { reply });
        void deliver(message.id, message.chat, reply).finally(() => transport.finished?.(message.id, message.chat));
        return 'accepted';
      }
      // /jobs and /stop are about the run this chat's lane is busy with: answered at once too.
      const reply = deps.jobs && jobsReply(deps.jobs, message, () => profileFor(message.chat)?.project);
      if (reply !== undefined) {
        inbox.mark(message.id, 'answered', { reply });
        void deliver(message.id, message.chat, reply).finally(() => transport.finished?.(message.id, message.chat));
        return 'accepted';
      }
      enqueue(
        {
          id: message.id,
          chat: message.chat,
          sender: message.sender,
          text: message.text,
          session: message.session,
          level: message.level,
          ...attachments,
        },
        message.tenant,
      );
      return 'accepted';
    },

    post(message) {
      if (!deps.senderAllowed(message.sender) || deps.senderDenied?.(message.sender)) return 'refused';
      const fresh = inbox.receive({
        id: message.id,
        chat: message.chat,
        sender: message.sender,
        text: message.text,
        owner: deps.owner,
        tenant: message.tenant,
        session: message.session,
      });
      if (!fresh) return 'duplicate';
      enqueue({ id: message.id, chat: message.chat, sender: message.sender, text: message.text, session: message.session }, message.tenant);
      return 'accepted';
    },

    recover(opts = {}) {
      const redeliver = (
        lane: LaneKey,
        id: string,
        reply: string,
        failure?: string,
        from?: DeliveryStep,
        sent?: number,
        files?: RanFiles['files'],
      ) =>
        void lanes.run(
          lane,
          async () => {
            await deliver(id, lane.chat, reply, failure, undefined, from, sent);
            const project = files && profileFor(lane.chat)?.project; // the answer's files, journaled with it, follow it
            if (files && project) await sendFilesOf(project, lane.chat, id, files);
          },
          { bounded: false },
        );
      recoverInbox({ inbox, log, owner: deps.owner, senderAllowed: deps.senderAllowed, strangers, enqueue, redeliver }, opts);
    },

    idle: () => lanes.idle(),

    close: () => strangers.close(),
  };
}

/** A message that waits behind the chat's own for this long is told it is queued. */
export const QUEUED_NOTICE_AFTER_MS = 1000;
