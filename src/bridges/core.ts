import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import type { PermissionLevel } from '../config/session.js';
import { isBerthError } from '../errors.js';
import { withActor } from '../admin/audit-trail.js';
import { ownerAlive } from '../runs/process-owner.js';
import { own } from '../own.js';
import type { Inbox, InboxEntry } from '../store/inbox.js';
import { chatCommand, type CommandContext } from './commands.js';
import { createLanes } from './lanes.js';
import type { BridgeState } from '../store/bridge-state.js';

/**
 * The bridge core: what every chat transport shares. A message is journaled (durable inbox)
 * before the transport acknowledges it or anything runs; it then waits in its chat's lane
 * (one at a time per chat, a bounded number of chats at once), is answered by a chat command
 * or a run of the project's agent in that chat's session, and ends replied or failed — with
 * the sender told either way. A transport adapter only turns its wire format into
 * InboundMessage and sends text back.
 */
export interface InboundMessage {
  /** The transport's identity of this message (Signal: sender uuid + timestamp): dedupes re-deliveries. */
  id: string;
  /** Where the answer goes (transport address: a uuid, a group id, a web user). */
  chat: string;
  /** The tenant key of the chat: the sender ("signal:<uuid>") or the group ("signal-group:<id>"). */
  tenant: string;
  /** The sender's own key (who may raise levels, who is paired). */
  sender: string;
  senderName?: string;
  text: string;
  /** What the transport needs to acknowledge it (Signal: whom to send the read receipt, for which timestamp). */
  receipt?: { recipient: string; timestamp: number };
  /** A transport where the person picks the conversation (web chat): its session id, else the chat's own. */
  session?: string;
  /** …and the level the person asked for (the transport applies it by the /level rule when it takes the message; journaled). */
  level?: PermissionLevel;
}

export interface ChatTransport {
  /** "signal", "web": names the inbox, the channel profile and the tenant keys. */
  readonly name: string;
  send(chat: string, text: string): Promise<void>;
  typing(chat: string, on: boolean): Promise<void>;
  /** Tell the transport the message is safe with berth (Signal: a read receipt). */
  acknowledge(message: InboundMessage): Promise<void>;
  /** The agent's output as it is printed (web chat streams it; Signal shows typing instead). */
  output?(chat: string, stream: 'stdout' | 'stderr', chunk: string): void;
  /** The project a chat belongs to, when the transport knows it (web chat: its login's); else channel profiles decide. */
  projectOf?(chat: string): string | undefined;
  /** /new where the person picks conversations (web chat): the transport makes the session and shows it. */
  newSession?(chat: string): string;
  /** The message has ended, answered or failed (web chat: its connection may send the next). */
  finished?(id: string, chat: string): void;
}

export interface BridgeCore {
  /** A message arrived; resolves once it is journaled (or known as a re-delivery). */
  receive(message: InboundMessage): 'accepted' | 'duplicate';
  /** At startup: answer what a dead berth journaled but never started; tell senders of runs it cut off. */
  recover(): void;
  /** Every accepted message has ended (for tests and shutdown). */
  idle(): Promise<void>;
}

export interface BridgeDeps {
  transport: ChatTransport;
  inbox: Inbox;
  state: BridgeState;
  admin: AdminService;
  config: () => BerthConfig;
  logger: Logger;
  /** This berth process ("<pid>.<start time>"), recorded on each message it takes. */
  owner?: string;
  /** Sender allowed to talk at all (pairing, allowlist). */
  senderAllowed: (sender: string) => boolean;
}

export function createBridgeCore(deps: BridgeDeps): BridgeCore {
  const { transport, inbox, logger } = deps;
  const lanes = createLanes(() => deps.config().bridges.max_concurrent_runs);
  const log = logger.child({ bridge: transport.name });

  const say = async (chat: string, text: string) => {
    try {
      await transport.send(chat, text);
    } catch (err) {
      log.warn({ err: String(err) }, 'could not send to the chat');
      throw err;
    }
  };

  /** The project (and workflow) answering a chat: the transport's own, else "signal:<chat>", then "signal". */
  function profileFor(chat: string): { project: string; workflow?: string } | undefined {
    const project = transport.projectOf?.(chat);
    if (project !== undefined) return { project };
    const channels = deps.config().channels;
    return own(channels, `${transport.name}:${chat}`) ?? own(channels, transport.name);
  }

  type Work = Required<Pick<InboxEntry, 'id' | 'chat' | 'sender' | 'text'>> & Pick<InboxEntry, 'session' | 'level'>;

  async function handle(entry: Work, tenant: string) {
    const profile = profileFor(entry.chat);
    if (!profile) {
      await fail(entry.id, entry.chat, 'no channel profile', `berth: this bot is not set up to answer here yet (no "${transport.name}" channel in berth.yaml).`);
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
    const command = chatCommand(entry.text);
    let reply: string;
    if (command) {
      reply = await command(ctx).catch((err: unknown) => `berth: ${isBerthError(err) ? err.message : 'that command failed'}`);
    } else {
      inbox.mark(entry.id, 'started', { reason: undefined });
      const typing = startTyping(entry.chat);
      // A workflow is several runs: one refused midway must not run its earlier steps again.
      const single = profile.workflow === undefined;
      try {
        const run = () => runFor(ctx, profile.workflow, entry.text, entry.chat);
        reply = await (single ? whenAdmitted(run) : run());
      } catch (err) {
        if (single && isBerthError(err, 'SHUTTING_DOWN')) {
          // Its run never started: the next berth answers it (recover() re-queues 'received').
          inbox.mark(entry.id, 'received', { reason: 'berth was stopping; it is answered after the restart' });
          return;
        }
        const reason = isBerthError(err) ? `${err.code}: ${err.message}` : 'internal error';
        log.warn({ id: entry.id, reason }, 'chat run failed');
        await fail(entry.id, entry.chat, reason, `berth: your message "${preview(entry.text)}" could not be run (${reason}).`);
        return;
      } finally {
        typing.stop();
      }
    }
    inbox.mark(entry.id, 'answered', { reply });
    await deliver(entry.id, entry.chat, reply);
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
      const teams = deps.admin.getProject(project).teams;
      const current = own(teams, team)?.members ?? [];
      if (current.includes(member)) return;
      await deps.admin.updateProject(project, { teams: { ...teams, [team]: { members: [...current, member] } } });
      log.info({ project, team, member }, 'group member joined its team');
    } catch (err) {
      log.warn({ err: String(err).slice(0, 200), team }, 'could not record a group member');
    }
  }

  /**
   * Send what was journaled as the answer. `failure`: it is the notice of a failure, and the
   * message ends failed with that reason once the sender has been told — so a berth killed in
   * between tells them after its restart, instead of ending the message in silence.
   */
  async function deliver(id: string, chat: string, reply: string, failure?: string) {
    try {
      await say(chat, reply);
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

  async function runFor(ctx: CommandContext, workflow: string | undefined, text: string, chat: string): Promise<string> {
    if (workflow) {
      const run = await deps.admin.runWorkflow(ctx.project, workflow, text);
      const last = run.steps.at(-1);
      return run.status === 'succeeded' ? (last?.stdout.trim() || 'done') : `berth: workflow ${workflow} ${run.status}${last ? `: ${(last.stderr || last.stdout).trim().slice(0, 500)}` : ''}`;
    }
    const decoder = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    const onOutput = transport.output ? (stream: 'stdout' | 'stderr', chunk: Buffer) => transport.output?.(chat, stream, decoder[stream].decode(chunk, { stream: true })) : undefined;
    // The level was set (by the /level rule) when the message was taken; the run uses the session's
    // level as it is now, so a level an admin lowered meanwhile is not raised again by a queued message.
    const run = await deps.admin.runMessage(ctx.project, { user: ctx.tenant, message: text, session: ctx.sessionId, onOutput });
    const out = run.stdout.trim();
    if (run.timed_out) return `${out}\n\n[berth: stopped after the time limit]`.trim();
    if (run.exit_code !== 0) return `${out}${out ? '\n\n' : ''}[exit ${run.exit_code}]${run.stderr.trim() ? `\n${run.stderr.trim().slice(-1500)}` : ''}`;
    return out || '(no output)';
  }

  /** Signal shows typing for 15 s: refresh it while the agent works. */
  function startTyping(chat: string) {
    const tick = () => void transport.typing(chat, true).catch(() => undefined);
    tick();
    const timer = setInterval(tick, 10_000);
    timer.unref();
    return {
      stop() {
        clearInterval(timer);
        void transport.typing(chat, false).catch(() => undefined);
      },
    };
  }

  function enqueue(entry: Work, tenant: string) {
    const queued = lanes.run(entry.chat, () =>
      // What a chat message does is the sender's doing, in the audit log too.
      withActor(`tenant:${entry.sender}`, entry.id, () => handle(entry, tenant))
        .catch((err) => log.error({ err: String(err), id: entry.id }, 'chat message failed'))
        .finally(() => transport.finished?.(entry.id, entry.chat)),
    );
    if (queued.waiting) void say(entry.chat, `berth: queued (${queued.ahead} ahead of yours); I will answer in order.`).catch(() => undefined);
  }

  return {
    receive(message) {
      const fresh = inbox.receive({ id: message.id, chat: message.chat, sender: message.sender, text: message.text, owner: deps.owner, tenant: message.tenant, session: message.session, level: message.level });
      // Acknowledged only once on disk; a re-delivery is acknowledged again (the first ack may be what was lost).
      void transport.acknowledge(message).catch((err) => log.warn({ err: String(err) }, 'acknowledge failed'));
      if (!fresh) return 'duplicate';
      if (!deps.senderAllowed(message.sender)) {
        deps.state.addPending(message.sender, message.senderName);
        void fail(message.id, message.chat, 'sender not approved', 'berth: this bot does not know you yet. The operator has been asked to approve you; try again later.');
        return 'accepted';
      }
      enqueue({ id: message.id, chat: message.chat, sender: message.sender, text: message.text, session: message.session, level: message.level }, message.tenant);
      return 'accepted';
    },

    recover() {
      for (const entry of inbox.open()) {
        // Another live berth of this home (a serve beside a bridge) is still answering it.
        if (entry.owner !== undefined && entry.owner !== deps.owner && ownerAlive(entry.owner)) continue;
        if (entry.chat === undefined || entry.sender === undefined || entry.text === undefined) {
          inbox.mark(entry.id, 'failed', { reason: 'journal entry incomplete' });
          continue;
        }
        const e = { id: entry.id, chat: entry.chat, sender: entry.sender, text: entry.text, session: entry.session, level: entry.level };
        if (entry.phase === 'received') {
          log.info({ id: entry.id }, 'answering a message a previous berth journaled');
          enqueue(e, entry.tenant ?? entry.sender);
        } else if (entry.phase === 'answered' && entry.reply !== undefined) {
          void lanes.run(entry.chat, () => deliver(entry.id, e.chat, entry.reply as string, entry.reason));
        } else {
          // Its run had started: running it again could do twice what the agent did once.
          const notice = `berth: I restarted while working on your message "${preview(e.text)}". It was not finished; please send it again.`;
          inbox.mark(entry.id, 'answered', { reply: notice, reason: 'berth restarted while this message was running' });
          void lanes.run(entry.chat, () => deliver(entry.id, e.chat, notice, 'berth restarted while this message was running'));
        }
      }
    },

    idle: () => lanes.idle(),
  };
}

const BUSY_ATTEMPTS = 10;

function preview(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** A stable session id for a chat and its generation (/new starts the next). */
export function chatSessionId(bridge: string, chat: string, generation: number): string {
  return `chat-${createHash('sha256').update(`${bridge}\0${chat}`).digest('hex').slice(0, 20)}-${generation}`;
}
