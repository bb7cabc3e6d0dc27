import type { AdminService } from '../admin/service.js';
import { PERMISSION_LEVELS, type PermissionLevel, type SessionRecord } from '../config/session.js';
import { BerthError, isBerthError } from '../base/errors.js';
import { own } from '../base/own.js';
import type { ScheduleService } from '../admin/schedules.js';
import { SCHEDULE_COMMANDS, SCHEDULE_HELP } from './schedule-commands.js';
import { CHECKPOINT_COMMANDS, CHECKPOINT_HELP } from './checkpoint-commands.js';
import { boundaryWords, SECRETS_RUNS, secretsWords } from './boundary.js';
import { PERSON_COMMANDS, PERSON_HELP, type PersonCommandContext } from './person-commands.js';
import { LEVEL_PROFILES } from '../plan/levels.js';

/**
 * Chat commands, answered by berth, never by the agent: /help, /new, /level, /whoami (and the
 * schedule and checkpoint commands of their own files). What a
 * chat user sees about themselves names tenant, session, level and workspace id — never a
 * host path.
 */
/** What the commands (and a level request) ask of the admin service: the project's settings alone, never its view (which reads every workspace record). */
export type CommandAdmin = Pick<
  AdminService,
  | 'getProjectMetadata'
  | 'getSession'
  | 'openSession'
  | 'updateSession'
  | 'listRuns'
  | 'restoreSession'
  | 'sessionCheckpoints'
  | 'forkSession'
>;

export interface CommandContext {
  admin: CommandAdmin;
  project: string;
  /** The chat's tenant key (sender, or group). */
  tenant: string;
  /** The sender's own key (who may raise a level). */
  sender: string;
  sessionId: string;
  /** Start the chat's next conversation; returns its session id. */
  newSession: () => string;
  /** Ask the operator for a level this person may not take (outbound/approvals.ts): what to tell them, or undefined (nobody to ask). */
  askRaise?: (level: PermissionLevel) => string | undefined;
  /** This chat, where a schedule made in it answers (schedule-commands.ts). */
  chat?: { channel: string; chat: string; session?: string };
  schedules?: ScheduleService;
  /** /usage: the person's model use today and this week (chat-cost.ts). */
  usage?: () => string;
  /** /export and /forget (person-commands.ts); without it they say the operator does them. */
  person?: PersonCommandContext['person'];
}

type Command = (ctx: CommandContext, args: string[]) => Promise<string>;

export const HELP = [
  'berth commands:',
  '/help — this text',
  '/new — start a new conversation (the agent forgets this one; your files stay)',
  '/level low|medium|high — what your agent may do (low: no internet; medium: allowed hosts and project memory; high: more tools)',
  ...CHECKPOINT_HELP,
  "/whoami — who you are here, this conversation, your agent's level and your folder",
  '/boundary — where your last run ran, what it saw and could reach, and whether that was as planned',
  '/secrets — the requests berth added a secret to for your agent (names and where, never a value)',
  ...PERSON_HELP,
  '/yes, /yes session, /no — answer your agent when it asks to reach a host this project does not allow',
  ...SCHEDULE_HELP,
  '/usage — the model tokens (and money) you used today and in the last 7 days, and your daily budget',
  '/jobs — what of yours is running now; /stop [run] ends it (its answer still comes here)',
  'Anything else goes to your agent.',
].join('\n');

const ORDER: Record<PermissionLevel, number> = { low: 0, medium: 1, high: 2 };

/** The session as it is, or as it will be made by the chat's next run (a new session is medium). */
function sessionOrNew(ctx: CommandContext) {
  try {
    return ctx.admin.getSession(ctx.project, ctx.sessionId);
  } catch (err) {
    if (isBerthError(err) && err.code === 'SESSION_NOT_FOUND') return undefined;
    throw err;
  }
}

/**
 * A chat user's level change, decided once for /level and the web page's selector: a raise
 * past what the project lets chat users take is refused (the words say why); otherwise the
 * session (made now if new) gets the level. `current`: the session as the caller has read it.
 */
export function changeLevel(
  ctx: CommandContext,
  level: PermissionLevel,
  current: SessionRecord | undefined,
): { session?: SessionRecord; refused?: string } {
  const now = current?.settings.permission_level ?? 'medium';
  const project = ctx.admin.getProjectMetadata(ctx.project);
  if (ORDER[level] > ORDER[now] && project.chat.raise_level === 'admins' && !project.admins.includes(ctx.sender)) {
    const refused = `only this project's admins may raise the level (it stays ${now}).`;
    if (project.chat.approvals === 'off' || !ctx.askRaise) return { refused };
    // The operator may allow it: the session must be there for the answer to land on.
    if (!current) ctx.admin.openSession(ctx.project, ctx.sessionId, ctx.tenant);
    const asked = ctx.askRaise(level);
    return { refused: asked ? `${refused} ${asked}` : refused };
  }
  if (!current) ctx.admin.openSession(ctx.project, ctx.sessionId, ctx.tenant);
  return { session: ctx.admin.updateSession(ctx.project, ctx.sessionId, { permission_level: level }) };
}

/** A /yes or /no with no question waiting (a waiting one is answered before the chat's lane: chat-approvals.ts). */
export const NOTHING_ASKED = 'berth: nothing is waiting for your answer.';

const COMMANDS: Record<string, Command> = {
  ...SCHEDULE_COMMANDS,
  ...CHECKPOINT_COMMANDS,
  ...PERSON_COMMANDS,
  async yes() {
    return NOTHING_ASKED;
  },
  async no() {
    return NOTHING_ASKED;
  },
  async usage(ctx) {
    return ctx.usage ? ctx.usage() : 'berth: model use is not shown in this chat.';
  },
  async help() {
    return HELP;
  },
  async new(ctx) {
    const id = ctx.newSession();
    return `berth: new conversation (session ${id}). Your files are still there.`;
  },
  async whoami(ctx) {
    const s = sessionOrNew(ctx);
    const level = s?.settings.permission_level ?? 'medium';
    const workspace = s?.settings.workspace.id ?? '(made at your first message)';
    const reach = LEVEL_PROFILES[level].egress ? 'and may reach the hosts this project allows' : 'with no network';
    return [
      `You are ${ctx.tenant}, talking to the agent of project ${ctx.project}.`,
      `This conversation: ${ctx.sessionId}${s ? '' : ' (new: it starts with your next message)'}; /new starts another.`,
      `Your agent's level: ${level}: it works in your folder ${reach}.`,
      `Your folder: ${workspace}.`,
    ].join('\n');
  },
  async boundary(ctx) {
    return boundaryWords(ctx.admin.listRuns(ctx.project, { user: ctx.tenant, limit: 1 }).runs[0]);
  },
  async secrets(ctx) {
    return secretsWords(ctx.admin.listRuns(ctx.project, { user: ctx.tenant, limit: SECRETS_RUNS }).runs);
  },
  async level(ctx, args) {
    const wanted = args[0];
    const session = sessionOrNew(ctx);
    const current = session?.settings.permission_level ?? 'medium';
    if (wanted === undefined) return `berth: level is ${current} (/level low|medium|high changes it)`;
    if (!(PERMISSION_LEVELS as readonly string[]).includes(wanted))
      throw new BerthError('CONFIG_INVALID', `"${wanted.slice(0, 20)}" is not a level: use low, medium or high`);
    const { refused } = changeLevel(ctx, wanted as PermissionLevel, session);
    return refused ? `berth: ${refused}` : `berth: level is now ${wanted}.`;
  },
};

/** The command a message is, or undefined when it is for the agent. */
export function chatCommand(text: string): ((ctx: CommandContext) => Promise<string>) | undefined {
  const m = /^\/([a-z]+)(?:\s+(.*))?$/s.exec(text.trim());
  if (!m) return undefined;
  const command = own(COMMANDS, m[1] as string);
  if (!command) return async () => `berth: unknown command /${(m[1] as string).slice(0, 20)}.\n${HELP}`;
  const args = (m[2] ?? '').trim().split(/\s+/).filter(Boolean);
  return (ctx) => command(ctx, args);
}
