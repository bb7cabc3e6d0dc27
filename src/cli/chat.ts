import { BerthError } from '../errors.js';
import { need, type Command } from './command.js';

/** Where `berth serve` listens unless told otherwise: the base of a link when --base is not given. */
const DEFAULT_BASE = 'http://127.0.0.1:8080';

/** The web chat's side of the CLI: a person's link. */
export const CHAT_COMMANDS: Record<string, Command> = {
  'chat-link': {
    usage: `chat-link <project> --user <name> [--base URL] [--ttl SECONDS]\n  A web chat link for one person (tenant web:<name>), valid 7 days unless --ttl says otherwise; shown once.\n  --base is where berth serve is reached (default ${DEFAULT_BASE}).`,
    options: { user: { type: 'string' }, base: { type: 'string' }, ttl: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      if (typeof v.user !== 'string') throw new BerthError('USAGE', 'missing --user <name>', { hint: 'berth chat-link <project> --user <name>' });
      const ttl = v.ttl === undefined ? undefined : Number(v.ttl);
      if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 60 || ttl > 90 * 86400)) throw new BerthError('USAGE', `--ttl must be 60-${90 * 86400} seconds, not "${String(v.ttl).slice(0, 20)}"`);
      let base: URL;
      try {
        base = new URL((v.base as string | undefined) ?? DEFAULT_BASE);
        if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error('scheme');
      } catch {
        throw new BerthError('USAGE', '--base must be an http(s) URL, e.g. http://127.0.0.1:8080');
      }
      const link = berth().admin.mintChatLink(pos[0] as string, v.user, ttl);
      io.out(`${new URL(link.path, base).href}\n`);
      io.err(`berth: a chat link for ${link.tenant} in project ${link.project}, valid until ${link.expires_at}; whoever opens it chats as ${link.tenant}\n`);
      return 0;
    },
  },
};
