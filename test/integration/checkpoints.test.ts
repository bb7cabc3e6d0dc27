import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import { chatCommand, type CommandContext } from '../../src/bridges/commands.js';
import { createBerth } from '../../src/main.js';
import { withActor } from '../../src/admin/audit-trail.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * Checkpoints with real containers (the test runtime: runc or runsc), warm ones kept between
 * messages: /undo puts back the exact bytes and the agent home, a tenant's links, hard links,
 * fifos and huge sparse files neither escape nor blow up the copy, /fork gives a session of its own.
 */
for (const quota of ['off', 'loop'] as const) {
  describe(`checkpoints, /undo and /fork (disk_quotas: ${quota})`, () => {
    let h: TestHome;
    const project = `ck${quota}`;
    const run = (user: string, message: string, session?: string) =>
      h.berth.runner.run({ project, tenantKey: user, message, sessionId: session });
    /** A chat's command, as the bridge core gives it (chatCommand + the real admin service). */
    const say = (tenant: string, sessionId: string, text: string, next = () => `${sessionId}-next`) => {
      const ctx: CommandContext = { admin: h.berth.admin, project, tenant, sender: tenant, sessionId, newSession: next };
      const command = chatCommand(text);
      if (!command) throw new Error(`${text} is not a command`);
      return command(ctx);
    };

    beforeAll(() => {
      h = testHome({ warm: true, config: `disk_quotas: ${quota}\nruns: { warm_idle_seconds: 60 }\n` });
      h.create({ name: project, workspace_isolation: true, limits: { timeout_seconds: 20, disk_mb: 1024 } });
    });
    afterAll(async () => {
      await h[Symbol.asyncDispose]();
    });

    it('/undo puts back the exact bytes and the conversation, retires the warm container, and goes back one message at a time', async () => {
      const first = await run(
        'web:alice',
        'printf "one\\n" > a.txt && mkdir -p d && head -c 3000 /dev/urandom > d/r.bin && echo turn1 >> $HOME/conv',
      );
      expect(first.exitCode).toBe(0);
      const ws = first.workspaceRoot;
      const bytes1 = fs.readFileSync(join(ws, 'd', 'r.bin'));
      // The tenant plants what could trip a copy: a link out, a hard link, a fifo, a 900 MiB sparse file (the run's file size limit is disk_mb).
      const second = await run(
        'web:alice',
        'printf "two\\n" > a.txt && ln -s /etc/shadow out && ln a.txt hard && mkfifo pipe && truncate -s 900M sparse && head -c 3000 /dev/urandom > d/r.bin && echo turn2 >> $HOME/conv',
      );
      expect(second.exitCode).toBe(0);
      expect(second.warm).toBe(true);
      // The third message's checkpoint copies all that: a link as a link, the fifo left out, the holes kept.
      const third = await run('web:alice', 'echo turn3 >> $HOME/conv && rm -f a.txt');
      expect(third.exitCode).toBe(0);
      const list = h.berth.admin.sessionCheckpoints(project, first.sessionId);
      expect(list).toHaveLength(3);
      expect(list.map((c) => c.message?.slice(0, 10))).toEqual(['printf "on', 'printf "tw', 'echo turn3']);
      expect(list[2]?.bytes).toBeLessThan(1024 * 1024); // the 900 MiB file is holes
      expect(await say('web:alice', first.sessionId, '/checkpoints')).toContain('newest first');

      expect(await say('web:alice', first.sessionId, '/undo')).toMatch(/^berth: undone\. .*before "echo turn3/);
      expect(fs.readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('two\n');
      expect(fs.readlinkSync(join(ws, 'out'))).toBe('/etc/shadow');
      expect(fs.statSync(join(ws, 'hard')).ino).toBe(fs.statSync(join(ws, 'a.txt')).ino);
      expect(fs.existsSync(join(ws, 'pipe'))).toBe(false);
      expect(fs.statSync(join(ws, 'sparse')).size).toBe(900 * 1024 ** 2);

      expect(await say('web:alice', first.sessionId, '/undo')).toContain('before "printf "two');
      expect(fs.readFileSync(join(ws, 'd', 'r.bin'))).toEqual(bytes1);
      // The next message sees the tree put back, in a new container, and the conversation as it was.
      const after = await run('web:alice', 'cat a.txt; ls; cat $HOME/conv');
      expect(after.warm).toBe(false);
      expect(after.containerId).not.toBe(third.containerId);
      expect(after.stdout).toContain('one\n');
      expect(after.stdout).not.toMatch(/\b(out|hard|sparse|pipe)\b/);
      expect(after.stdout).toContain('turn1\n');
      expect(after.stdout).not.toContain('turn2');
      // The checkpoint before "after" and the one before the first message are left.
      expect(h.berth.admin.sessionCheckpoints(project, first.sessionId)).toHaveLength(2);
    });

    it("/fork: a session of its own with the files and the conversation; neither writes into the other's", async () => {
      const base = await run('web:bob', 'echo base > shared.txt && echo said-base >> $HOME/conv', 'bob-main');
      expect(base.exitCode).toBe(0);
      const words = await say('web:bob', 'bob-main', '/fork try b', () => 'bob-fork');
      expect(words).toContain('forked');
      expect(h.berth.admin.getSession(project, 'bob-fork')).toMatchObject({ title: 'try b', settings: { workspace: { mode: 'session' } } });
      const inFork = await run('web:bob', 'cat shared.txt; cat $HOME/conv; echo b > only-b', 'bob-fork');
      expect(inFork.stdout).toBe('base\nsaid-base\n');
      expect(inFork.workspaceRoot).not.toBe(base.workspaceRoot);
      const inMain = await run('web:bob', 'ls; echo main-only >> shared.txt', 'bob-main');
      expect(inMain.stdout).not.toContain('only-b');
      expect(fs.readFileSync(join(inFork.workspaceRoot, 'shared.txt'), 'utf8')).toBe('base\n');
      // Another person's conversation is not theirs to fork or undo.
      await expect(h.berth.admin.forkSession(project, 'bob-main', 'bob-fork')).rejects.toSatisfy((e) => isBerthError(e, 'CONFIG_INVALID'));
      expect(await say('web:eve', 'bob-main', '/undo').catch((e: unknown) => (isBerthError(e) ? e.code : e))).toBe('PERMISSION_DENIED');
    });

    it('/undo holds the workspace: a message sent at the same moment runs on the tree put back, in a new container', async () => {
      await run('web:dora', 'printf "one\\n" > a.txt', 'dora-1');
      const before = await run('web:dora', 'printf "two\\n" > a.txt', 'dora-1');
      expect(before.warm).toBe(true);
      // Both at once: the message is accepted while the restore runs, and waits for the workspace's turn.
      const restoring = say('web:dora', 'dora-1', '/undo');
      const next = run('web:dora', 'cat a.txt', 'dora-1');
      expect(await restoring).toContain('undone');
      const after = await next;
      expect(after.stdout).toBe('one\n');
      expect(after.containerId).not.toBe(before.containerId);
      // A fork holds the source's turn the same way: it copies the tree as the last message left it.
      const forking = say('web:dora', 'dora-1', '/fork', () => 'dora-2');
      const write = run('web:dora', 'printf "three\\n" > a.txt', 'dora-1');
      expect(await forking).toContain('forked');
      await write;
      expect((await run('web:dora', 'cat a.txt', 'dora-2')).stdout).toBe('one\n');
    });

    it('nothing to undo is said plainly; a restore to an unknown checkpoint is CHECKPOINT_NOT_FOUND', async () => {
      expect(await say('web:carol', 'carol-new', '/undo')).toContain('nothing to undo');
      await run('web:carol', 'true', 'carol-1');
      await expect(h.berth.admin.restoreSession(project, 'carol-1', '20200101T000000000Z-000000')).rejects.toSatisfy((e) =>
        isBerthError(e, 'CHECKPOINT_NOT_FOUND'),
      );
      await expect(h.berth.admin.restoreSession(project, 'carol-1', '../../etc')).rejects.toSatisfy((e) =>
        isBerthError(e, 'CONFIG_INVALID'),
      );
      // A second process (the CLI while serve runs) writes nothing under serve's warm container.
      const cli = createBerth({ home: h.home, logLevel: 'silent' });
      await expect(cli.admin.restoreSession(project, 'carol-1')).rejects.toSatisfy((e) => isBerthError(e, 'BUSY'));
      // As the bridge core runs a chat's command: as its person, in the audit log.
      expect(await withActor('tenant:web:carol', 'msg-1', () => say('web:carol', 'carol-1', '/undo'))).toContain('undone');
      const audit = h.berth.audit.list({ project, actor: 'tenant:web:carol', limit: 10 });
      expect(audit.map((e) => [e.action, e.target, e.outcome])).toContainEqual(['session.restore', 'carol-1', 'ok']);
      expect(await say('web:carol', 'carol-1', '/undo')).toContain('nothing to undo');
    });
  });
}
