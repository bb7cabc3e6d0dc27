import type { ScheduleService } from '../admin/schedules.js';
import { createChatCost } from './chat-cost.js';
import { openBudgetDays } from '../store/budget-days.js';
import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import type { BerthConfig } from '../config/berth-config.js';
import { chatFormatOf } from '../config/metadata.js';
import type { PermissionLevel, SessionRecord } from '../config/session.js';
import { tenantActor, withActor } from '../admin/audit-trail.js';
import { BerthError, isBerthError } from '../base/errors.js';
import { tenantOfChatUser, type ChatLogin } from '../store/chat-links.js';
import type { TranscriptEntry } from '../store/chat-transcripts.js';
import { openBridgeState, type BridgeState } from '../store/bridge-state.js';
import { openInbox, type Inbox } from '../store/inbox.js';
import { changeLevel, type CommandContext } from './commands.js';
import type { PersonChat } from './person-commands.js';
import type { ChatTransport } from './chat-transport.js';
import type { Metrics } from '../base/metrics.js';
import { createBridgeCore, type BridgeCore } from './core.js';
import { levelAsker } from './approval-words.js';
import {
  agentKindOf,
  progressMessage,
  type AgentKind,
  type ChatSessionView,
  type WebRunMessage,
  type WebServerMessage,
  type WebUploadView,
} from './web-protocol.js';
import { approvalForWeb, openWebHistory } from './web-history.js';
import { createWebFiles } from './web-files.js';
import { createSessionStarter } from './web-sessions.js';
import { openChatUploads } from '../store/chat-uploads.js';
import { join } from 'node:path';
import type { ApprovalDecision, ApprovalView } from '../store/approvals.js';
import type { Approvals } from '../outbound/approvals.js';

/**
 * The web chat: a second transport on the bridge core. A person is logged in by their chat link
 * as tenant "web:<user>" of one project; they pick or start sessions, and each message runs
 * through the core (durable inbox, lanes, commands) like a Signal message. The chat address is
 * "<project>/<user>/<session>" (none of the three can hold "/"), so the core's per-chat lane is a
 * session, and everything pushed goes to that user's open sockets.
 */
export type WebLogin = Pick<ChatLogin, 'project' | 'user'>;

/** One open socket of a user (web-socket.ts), as the transport sees it. */
export interface WebClient {
  push(message: WebServerMessage): void;
  /** Its person's logins were revoked in this process: check its own now (closed when it ended). */
  recheckLogin?(): void;
}

const MAX_SOCKETS_PER_USER = 8;
/** A run's questions come back as cards; a level request is the operator's (its person hears the outcome). */
const carded = (a: ApprovalView) => a.kind === 'egress' || a.kind === 'secret';

const whoOf = ({ project, user }: WebLogin): WebLogin => ({ project, user });
const addressOf = (login: WebLogin, session: string) => `${login.project}/${login.user}/${session}`;
function parseAddress(chat: string): (WebLogin & { session: string }) | undefined {
  const [project, user, session, ...rest] = chat.split('/');
  return project && user && session && rest.length === 0 ? { project, user, session } : undefined;
}
/** The inbox id: the page's uuid, prefixed so two users (or projects) never collide. */
const inboxId = (login: WebLogin, id: string) => `${login.project}/${login.user}/${id}`;
const clientIdOf = (id: string) => id.slice(id.lastIndexOf('/') + 1);

export const viewOfSession = (s: SessionRecord): ChatSessionView => ({
  id: s.id,
  title: s.title ?? null,
  created_at: s.created_at,
  updated_at: s.updated_at,
  runs: s.runs,
  permission_level: s.settings.permission_level,
});

export interface WebChat {
  readonly core: BridgeCore;
  readonly inbox: Inbox;
  readonly state: BridgeState;
  /** Whom a chat link would log in (the page that asks first); UNAUTHORIZED when it does not work. */
  peekLink(linkToken: string): WebLogin;
  /** Opening a chat link (it is used up): the credential for the cookie, and when it ends. */
  login(linkToken: string): { credential: string; expires_at: string };
  loginOf(credential: string): WebLogin;
  /** What the person's agent is (the project's preset; "custom" for its own argv): the page's empty state says so. */
  agentOf(login: WebLogin): AgentKind;
  sessions(login: WebLogin): ChatSessionView[];
  /** A new session of the person's: LIMIT_REACHED past bridges.web.max_sessions_per_user or new_sessions_per_minute. */
  newSession(login: WebLogin): ChatSessionView;
  /** Delete one of the person's own sessions, as the admin's delete does (container, agent home, transcript). */
  deleteSession(login: WebLogin, session: string): { session: string; deleted: true };
  history(login: WebLogin, session: string): TranscriptEntry[];
  /** Set a session's level by the project's rule for /level (raising may need an admin). */
  setLevel(login: WebLogin, session: string, level: PermissionLevel): Promise<ChatSessionView>;
  /** Its person names one of their sessions. */
  rename(login: WebLogin, session: string, title: string): ChatSessionView;
  /**
   * A run from a socket: its level set (by the same rule), journaled, then answered through the
   * core. `credential`: the login it came with, checked again when its turn comes (a revoked or
   * expired one: it is not run); none for a caller of this process that has no login.
   */
  run(login: WebLogin, message: WebRunMessage, credential?: string): Promise<'accepted' | 'duplicate'>;
  /** A socket opened (it is shown what waits for its person's answer); returns how to forget it. BUSY past the per-user bound. */
  attach(login: WebLogin, client: WebClient): () => void;
  /** A file the person uploads for their next message (web-files.ts): its id goes in the run message's files. */
  upload(login: WebLogin, name: string, type: string | undefined, data: Uint8Array): WebUploadView;
  /** The person answers their agent's request (an approval card): APPROVAL_NOT_FOUND unless it is theirs and waits. */
  answer(login: WebLogin, id: string, decision: ApprovalDecision): void;
}

/** What the web chat is made from (berth serve's bridges pass theirs through). */
export interface WebChatDeps {
  admin: AdminService;
  config: () => BerthConfig;
  logger: Logger;
  stateDir: string;
  bridgeDir: string;
  owner?: string;
  approvals?: Pick<Approvals, 'answer' | 'pending' | 'requestLevel'> & Partial<Pick<Approvals, 'requestBudget'>>;
  metrics?: Pick<Metrics, 'replyUndelivered'>;
  schedules?: ScheduleService;
  person?: PersonChat;
}

export function createWebChat(deps: WebChatDeps): WebChat {
  const { admin } = deps;
  const inbox = openInbox(deps.bridgeDir, 'web');
  const state = openBridgeState(deps.bridgeDir, 'web');
  const files = createWebFiles(openChatUploads(join(deps.bridgeDir, 'web-uploads')), admin);
  // Keyed by "<project>/<user>": a Map, never an object's properties.
  const clients = new Map<string, Set<WebClient>>();
  const log = deps.logger.child({ bridge: 'web' });
  const history = openWebHistory({ stateDir: deps.stateDir, admin, log });

  const push = (login: WebLogin, message: WebServerMessage) => {
    for (const client of clients.get(`${login.project}/${login.user}`) ?? []) client.push(message);
  };
  // A revoke (or a project deleted) in this process: that person's sockets close now, not at their next message.
  admin.onChatLogout((project, user) => {
    for (const [key, set] of clients) {
      const theirs = user === undefined ? key.startsWith(`${project}/`) : key === `${project}/${user}`;
      if (!theirs) continue;
      for (const client of [...set]) {
        try {
          client.recheckLogin?.();
        } catch (err) {
          log.warn({ err: String(err).slice(0, 200) }, 'could not close a logged-out chat socket'); // the revoke itself stands
        }
      }
    }
  });
  // The login each waiting message came with (inbox id → credential; null: a caller without one).
  // In memory only: a credential is never journaled.
  const credentials = new Map<string, string | null>();

  /** Whether a message may still run: its login holds (one journaled before a restart: its person still has a login). */
  function loginHolds(message: { id: string; chat: string }): boolean {
    const credential = credentials.get(message.id);
    if (credential === null) return true;
    try {
      if (credential !== undefined) return admin.chatLoginOf(credential) !== undefined;
      const a = parseAddress(message.chat);
      return a !== undefined && admin.listChatAccess(a.project, a.user).logins.length > 0;
    } catch {
      return false; // revoked, expired, or the project is gone
    }
  }

  const addressed = (chat: string) => {
    const a = parseAddress(chat);
    if (!a) throw new BerthError('INTERNAL', 'not a web chat address');
    return a;
  };

  /** A new session, inside the person's bounds (web-sessions.ts). */
  const createSession = createSessionStarter(admin, () => deps.config().bridges.web);

  /** The user's own session; another tenant's is as unknown as a missing one. */
  function ownSession(login: WebLogin, id: string): SessionRecord {
    const missing = () => new BerthError('SESSION_NOT_FOUND', `you have no session "${id.slice(0, 128)}"`);
    let session: SessionRecord;
    try {
      session = admin.getSession(login.project, id);
    } catch (err) {
      if (isBerthError(err, 'SESSION_NOT_FOUND') || isBerthError(err, 'CONFIG_INVALID')) throw missing();
      throw err;
    }
    if (session.tenant_key !== tenantOfChatUser(login.user)) throw missing();
    return session;
  }

  const transport: ChatTransport = {
    name: 'web',
    async send(chat, text, reply) {
      const a = addressed(chat);
      // A "queued" notice is sent from inside core.receive: yield once, so run() has written the
      // message it answers to the transcript first.
      await Promise.resolve();
      // On disk before it is pushed: a person who closed the tab sees the answer when they come back.
      const format = reply?.by === 'berth' ? 'berth' : chatFormatOf(admin.getProjectMetadata(a.project));
      const output = reply?.output?.length ? { output: reply.output, ...(reply.exit !== undefined ? { exit: reply.exit } : {}) } : {};
      history.keep(a, { role: 'reply', text, format, ...(reply?.steps?.length ? { steps: reply.steps } : {}), ...output });
      push(a, { type: 'reply', session_id: a.session, text, format, ...output });
    },
    async typing(chat, on) {
      const a = addressed(chat);
      push(a, { type: 'typing', session_id: a.session, on });
    },
    async acknowledge(message) {
      const a = addressed(message.chat);
      push(a, { type: 'accepted', id: clientIdOf(message.id), session_id: a.session });
    },
    output(chat, stream, chunk) {
      const a = parseAddress(chat); // called from the engine's stream: never throws
      if (a && chunk) push(a, { type: 'output', session_id: a.session, stream, chunk });
    },
    progress(chat, update) {
      const a = parseAddress(chat); // called from the engine's stream: never throws
      if (a) push(a, progressMessage(a.session, update));
    },
    approval(chat, event) {
      const a = parseAddress(chat); // called from the egress proxy: never throws
      if (!a) return;
      const { entry, message } = approvalForWeb(event, a.session, new Date().toISOString());
      history.keepQuietly(a, entry);
      push(a, message);
    },
    fetchAttachment: async (ref, limits) => files.fetch(ref, limits.maxBytes),
    runFiles: async (chat, _answerTo, _project, run, list) => files.show(addressed(chat), run, list, history.keep, push),
    projectOf: (chat) => parseAddress(chat)?.project,
    newSession(chat) {
      const a = addressed(chat);
      const session = createSession(a);
      push(a, { type: 'session', session_id: session.id });
      return session.id;
    },
    finished(id, chat) {
      credentials.delete(id);
      const a = parseAddress(chat);
      if (a) push(a, { type: 'done', id: clientIdOf(id), session_id: a.session });
    },
  };

  const core = createBridgeCore({
    transport,
    inbox,
    state,
    admin,
    config: deps.config,
    logger: deps.logger,
    owner: deps.owner,
    // The chat link is the approval: whoever holds a login was let in by an admin.
    senderAllowed: () => true,
    approvals: deps.approvals,
    metrics: deps.metrics,
    // …and a message whose login was revoked (or ended) while it waited is not run.
    stillAllowed: loginHolds,
    schedules: deps.schedules,
    person: deps.person,
    cost: createChatCost({ admin, config: deps.config, approvals: deps.approvals, days: openBudgetDays(deps.stateDir) }),
    jobs: admin,
  });
  core.recover();

  async function setLevel(login: WebLogin, id: string, level: PermissionLevel): Promise<ChatSessionView> {
    const session = ownSession(login, id);
    if (session.settings.permission_level === level) return viewOfSession(session);
    // The /level command's decision (commands.ts), so who may raise a level is decided in one place.
    const tenant = tenantOfChatUser(login.user);
    const ctx: CommandContext = {
      admin,
      project: login.project,
      tenant,
      sender: tenant,
      sessionId: id,
      newSession: () => createSession(login).id,
    };
    const chat = addressOf(login, id);
    // Refused, the operator may be asked: the answer comes as a reply, and the selector follows a raise.
    ctx.askRaise = levelAsker(
      deps.approvals,
      ctx,
      (text) => void transport.send(chat, text).catch(() => undefined),
      (raised) => push(login, { type: 'level', session_id: id, permission_level: raised }),
    );
    const changed = changeLevel(ctx, level, session);
    if (!changed.session) {
      throw new BerthError('PERMISSION_DENIED', changed.refused ?? 'the level was not changed', {
        rule: 'raise_level',
        hint: 'a project admin may raise it, or the project\'s chat.raise_level may be "anyone"',
      });
    }
    return viewOfSession(changed.session);
  }

  function rename(login: WebLogin, id: string, title: string): ChatSessionView {
    ownSession(login, id);
    return viewOfSession(admin.renameSession(login.project, id, title));
  }

  return {
    core,
    inbox,
    state,
    peekLink: (linkToken) => whoOf(admin.peekChatLink(linkToken)),
    login(linkToken) {
      const { credential, expires_at } = admin.openChatLink(linkToken);
      return { credential, expires_at };
    },
    loginOf: (credential) => whoOf(admin.chatLoginOf(credential)),
    agentOf: (login) => agentKindOf(admin.getProjectMetadata(login.project).agent),
    sessions: (login) => admin.listSessions(login.project, tenantOfChatUser(login.user)).map(viewOfSession),
    newSession: (login) => viewOfSession(createSession(login)),
    deleteSession(login, id) {
      ownSession(login, id);
      admin.deleteSession(login.project, id);
      return { session: id, deleted: true };
    },
    history(login, id) {
      ownSession(login, id);
      return history.read({ project: login.project, session: id });
    },
    setLevel,
    rename,
    async run(login, message, credential) {
      // A socket message is no HTTP request: name the user for the audit log here (the run itself is named by the core).
      await withActor(tenantActor(tenantOfChatUser(login.user)), message.id, () =>
        setLevel(login, message.session_id, message.permission_level),
      );
      const tenant = tenantOfChatUser(login.user);
      const sent = message.files?.length ? files.attachmentsOf(login, message.files) : undefined;
      const outcome = core.receive({
        id: inboxId(login, message.id),
        chat: addressOf(login, message.session_id),
        tenant,
        sender: tenant,
        text: message.input,
        session: message.session_id,
        level: message.permission_level,
        ...(sent ? { attachments: sent.attachments } : {}),
      });
      if (outcome === 'accepted') {
        // Before its turn can come (the lane takes it in a later tick).
        credentials.set(inboxId(login, message.id), credential ?? null);
        history.sent(
          { project: login.project, session: message.session_id },
          { role: 'user', text: message.input, id: message.id, level: message.permission_level, ...(sent ? { files: sent.shown } : {}) },
        );
      }
      log.info({ project: login.project, session: message.session_id, outcome }, 'web chat message');
      return outcome;
    },
    upload: (login, name, type, data) => files.upload(login, name, type, data),
    answer(login, id, decision) {
      if (!deps.approvals) throw new BerthError('APPROVAL_NOT_FOUND', 'nothing waits for your answer here');
      const tenant = tenantOfChatUser(login.user);
      // Audited where the answer is applied (approvals.ts settle), with this actor.
      deps.approvals.answer(id, decision, { actor: tenantActor(tenant), project: login.project, tenant });
    },
    attach(login, client) {
      const key = `${login.project}/${login.user}`;
      const set = clients.get(key) ?? new Set<WebClient>();
      if (set.size >= MAX_SOCKETS_PER_USER)
        throw new BerthError('BUSY', `at most ${MAX_SOCKETS_PER_USER} open chat windows per person`, { retry_after: 5 });
      set.add(client);
      clients.set(key, set);
      // A page opened (or reloaded) while its agent waits for an answer: the cards come back.
      for (const approval of deps.approvals?.pending({ project: login.project, tenant: tenantOfChatUser(login.user) }) ?? []) {
        if (carded(approval)) client.push({ type: 'approval', session_id: approval.session, approval });
      }
      return () => {
        set.delete(client);
        if (set.size === 0 && clients.get(key) === set) clients.delete(key);
      };
    },
  };
}
