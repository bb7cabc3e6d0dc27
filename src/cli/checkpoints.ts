import type { CheckpointView } from '../admin/checkpoints.js';
import { printable } from '../base/printable.js';
import { need, type Command } from './command.js';

/**
 * A session's checkpoints from the command line (docs/checkpoints.md). From a second process
 * while serve runs: a run going on refuses the restore (BUSY); serve's warm container of the
 * session is not retired from here, and sees the restored tree (it is written in place).
 */
const line = (c: CheckpointView) =>
  `${c.id}\t${c.created_at}\t${c.bytes} bytes\t${c.files} files${c.run ? `\trun=${c.run}` : ''}${c.message ? `\t${printable(c.message)}` : ''}\n`;

export const CHECKPOINT_CLI_COMMANDS: Record<string, Command> = {
  'session snapshot': {
    usage:
      'session snapshot <project> <session-id>\n  Keep a checkpoint of the session now: its workspace and its agent home (the conversation).',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      io.out(line(await berth().admin.snapshotSession(pos[0] as string, pos[1] as string)));
      return 0;
    },
  },
  'session checkpoints': {
    usage:
      "session checkpoints <project> <session-id>\n  The session's checkpoints, oldest first: id, when, bytes it alone holds, files, run, message.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and session id');
      for (const c of berth().admin.sessionCheckpoints(pos[0] as string, pos[1] as string)) io.out(line(c));
      return 0;
    },
  },
  'session restore': {
    usage:
      'session restore <project> <session-id> [<checkpoint>]\n  Put the workspace and the conversation back as the checkpoint (default: the newest) kept them; it and the newer ones are used up.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, pos.length === 3 ? 3 : 2, 'project name and session id');
      const c = await berth().admin.restoreSession(pos[0] as string, pos[1] as string, pos[2]);
      io.out(`restored session ${pos[1]} to ${c.id} (${c.created_at})\n`);
      return 0;
    },
  },
  'session fork': {
    usage:
      "session fork <project> <session-id> <new-session-id>\n  A new session of the same tenant with the session's files (in a workspace of its own) and conversation as they are now.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 3, 'project name, session id and new session id');
      const s = await berth().admin.forkSession(pos[0] as string, pos[1] as string, pos[2] as string);
      io.out(`forked session ${pos[1]} into ${s.id} (mode=${s.settings.workspace.mode})\n`);
      return 0;
    },
  },
};
