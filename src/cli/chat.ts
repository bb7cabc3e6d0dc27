import { BerthError } from '../base/errors.js';
import { printable } from '../base/printable.js';
import { MAX_CHAT_LINK_TTL_SECONDS } from '../store/chat-links.js';
import { need, type Command } from './command.js';

/** Where `berth serve` listens unless told otherwise: the base of a link when --base is not given. */
const DEFAULT_BASE = 'http://127.0.0.1:8080';

const needUser = (v: Record<string, unknown>, usage: string): string => {
  if (typeof v.user !== 'string') throw new BerthError('USAGE', 'missing --user <name>', { hint: usage });
  return v.user;
};

/** The web chat's side of the CLI: a person's link, who is logged in, and revoking a person. */
export const CHAT_COMMANDS: Record<string, Command> = {
  'chat-link': {
    usage: `chat-link <project> --user <name> [--base URL] [--ttl SECONDS]\n  A web chat link for one person (tenant web:<name>); shown once. It works once, within a day; the login it opens lasts 7 days unless --ttl says otherwise (at most 30 days).\n  --base is where berth serve is reached (default ${DEFAULT_BASE}).`,
    options: { user: { type: 'string' }, base: { type: 'string' }, ttl: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const user = needUser(v, 'berth chat-link <project> --user <name>');
      const ttl = v.ttl === undefined ? undefined : Number(v.ttl);
      if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 60 || ttl > MAX_CHAT_LINK_TTL_SECONDS)) {
        throw new BerthError('USAGE', `--ttl must be 60-${MAX_CHAT_LINK_TTL_SECONDS} seconds, not "${String(v.ttl).slice(0, 20)}"`);
      }
      let base: URL;
      try {
        base = new URL((v.base as string | undefined) ?? DEFAULT_BASE);
        if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error('scheme');
      } catch {
        throw new BerthError('USAGE', '--base must be an http(s) URL, e.g. http://127.0.0.1:8080');
      }
      const link = berth().admin.mintChatLink(pos[0] as string, user, ttl);
      io.out(`${new URL(link.path, base).href}\n`);
      io.err(
        `berth: a chat link for ${link.tenant} in project ${link.project}: it works once, until ${link.expires_at}; the login it opens lasts until ${link.login_expires_at}. Whoever opens it first chats as ${link.tenant}.\n`,
      );
      return 0;
    },
  },
  'chat-link logins': {
    usage:
      'chat-link logins <project> [--user <name>] [--json]\n  Who can get in to the web chat: browsers logged in and links not used yet (never a token).',
    options: { user: { type: 'string' }, json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const access = berth().admin.listChatAccess(pos[0] as string, v.user as string | undefined);
      if (v.json) {
        io.out(`${JSON.stringify(access, null, 2)}\n`);
        return 0;
      }
      const rows = [...access.logins.map((e) => ({ ...e, kind: 'login' })), ...access.links.map((e) => ({ ...e, kind: 'link (unused)' }))];
      if (rows.length === 0) io.out('(no logins and no unused links)\n');
      for (const r of rows) io.out(`${printable(r.user)}  ${r.kind}  since ${r.created_at}  until ${r.expires_at}\n`);
      return 0;
    },
  },
  'chat-link revoke': {
    usage:
      'chat-link revoke <project> --user <name>\n  Log a person out of the web chat everywhere and void their unused links (their sessions and files stay).',
    options: { user: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const user = needUser(v, 'berth chat-link revoke <project> --user <name>');
      const r = berth().admin.revokeChatUser(pos[0] as string, user);
      io.out(`${r.tenant} in project ${r.project}: ${r.logins_revoked} login(s) ended, ${r.links_revoked} unused link(s) voided\n`);
      return 0;
    },
  },
};
