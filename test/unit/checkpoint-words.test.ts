import { describe, expect, it } from 'vitest';
import type { CheckpointView } from '../../src/admin/checkpoints.js';
import { BerthError } from '../../src/base/errors.js';
import { CHECKPOINT_COMMANDS, sizeWords, type CheckpointCommandContext } from '../../src/bridges/checkpoint-commands.js';
import { chatCommand, HELP } from '../../src/bridges/commands.js';

/** /undo, /checkpoints and /fork in a chat person's words, over a stand-in of the admin service. */
const view = (id: string, message: string, bytes: number): CheckpointView => ({
  id,
  session: 's',
  created_at: new Date().toISOString(),
  message,
  bytes,
  files: 3,
});

function ctx(over: Partial<CheckpointCommandContext['admin']> = {}, tenant = 'web:alice') {
  const calls: string[] = [];
  const c: CheckpointCommandContext = {
    project: 'p',
    tenant,
    sessionId: 's',
    newSession: () => 's-2',
    admin: {
      getSession: () => ({ tenant_key: 'web:alice' }),
      snapshotSession: async () => view('x', '', 0),
      sessionCheckpoints: () => [
        view('20261128T000000000Z-aaaaaa', 'first thing', 900),
        view('20261128T000001000Z-bbbbbb', 'then this', 3 * 1048576),
      ],
      restoreSession: async () => view('20261128T000001000Z-bbbbbb', 'then this', 1),
      forkSession: async (_p, from, to, opts) => {
        calls.push(`${from}->${to}:${opts?.title ?? ''}:${opts?.fresh}`);
        return {} as never;
      },
      ...over,
    },
  };
  return { c, calls };
}

describe('checkpoint commands in a chat', () => {
  it('are listed in /help and parsed as commands', () => {
    for (const name of ['/undo', '/checkpoints', '/fork']) {
      expect(HELP).toContain(name);
      expect(chatCommand(`${name} x`)).toBeDefined();
    }
  });

  it('/undo says what it went back to; nothing kept or a run going on are said plainly', async () => {
    expect(await CHECKPOINT_COMMANDS.undo!(ctx().c, [])).toMatch(/^berth: undone\. .* before "then this"/);
    const none = ctx({
      restoreSession: async () => {
        throw new BerthError('CHECKPOINT_NOT_FOUND', 'none');
      },
    });
    expect(await CHECKPOINT_COMMANDS.undo!(none.c, [])).toContain('nothing to undo');
    const busy = ctx({
      restoreSession: async () => {
        throw new BerthError('BUSY', 'running');
      },
    });
    expect(await CHECKPOINT_COMMANDS.undo!(busy.c, [])).toContain('still working');
  });

  it('/checkpoints lists newest first with sizes; /fork switches the chat and names the new conversation', async () => {
    const list = await CHECKPOINT_COMMANDS.checkpoints!(ctx().c, []);
    expect(list.split('\n').slice(1, 3)).toEqual([
      expect.stringMatching(/^1\. before "then this", .*, 3\.0 MiB \(20261128T000001000Z-bbbbbb\)$/),
      expect.stringMatching(/^2\. before "first thing", .*, 900 bytes/),
    ]);
    const f = ctx();
    expect(await CHECKPOINT_COMMANDS.fork!(f.c, ['try', 'b'])).toContain('"try b" (s-2)');
    expect(f.calls).toEqual(['s->s-2:try b:true']);
    expect(await CHECKPOINT_COMMANDS.fork!(f.c, ['x'.repeat(81)])).toContain('at most 80');
    expect(sizeWords(1536)).toBe('1.5 KiB');
  });

  it("another person's conversation is refused", async () => {
    await expect(CHECKPOINT_COMMANDS.undo!(ctx({}, 'web:eve').c, [])).rejects.toThrow(/not yours/);
  });
});
