import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createMatrixBridge, MatrixBridgeSchema } from '../../src/channels/matrix.js';
import { startFakeMatrix, type FakeMatrix } from '../fakes/matrix.js';

/**
 * Invites against the fake homeserver: a join refused with 429 M_LIMIT_EXCEEDED (Synapse counts a
 * join against the bot's message rate limit, so a bot that has just answered a burst meets it) is
 * tried again after the wait the homeserver names, since the invite shows in one sync only; a join
 * refused for another reason is not.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function rig(): Promise<{ fake: FakeMatrix; logs: Array<{ msg: string }>; alice: string }> {
  const fake = await startFakeMatrix();
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-mx-joins-'));
  cleanups.push(async () => {
    await fake.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const logs: Array<{ msg: string }> = [];
  const bridge = createMatrixBridge({
    config: MatrixBridgeSchema.parse({ homeserver: fake.url, user_id: fake.botUserId, access_token: fake.botAccessToken }),
    dir,
    logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as { msg: string }) }),
    take: () => 'accepted',
    postOut: async () => ({ status: 200 }),
    backoffMs: { min: 10, max: 50 },
  });
  bridge.start();
  cleanups.push(() => bridge.stop());
  await fake.waitForPoll();
  return { fake, logs, alice: `@alice:${fake.serverName}` };
}

describe('Matrix: invites', () => {
  it('a join refused twice with M_LIMIT_EXCEEDED is tried again after each wait, and the bot is in the room', async () => {
    const { fake, logs, alice } = await rig();
    fake.rateLimitNext('/join/', 200, { count: 2 });
    const room = fake.createRoom({ members: [alice], invite: true, direct: true });
    await fake.waitFor(() => fake.members(room)[fake.botUserId] === 'join', 10_000);
    expect(logs.filter((l) => l.msg.startsWith('rate limited joining a room'))).toHaveLength(2);
    expect(logs.some((l) => l.msg === 'could not join a room berth was invited to')).toBe(false);
  });

  it('a join refused as forbidden is not tried again: it is logged, and the next invite is joined', async () => {
    const { fake, logs, alice } = await rig();
    fake.failNext('/join/', { status: 403, errcode: 'M_FORBIDDEN', error: 'You are not invited to this room.' });
    const refused = fake.createRoom({ members: [alice], invite: true, direct: true });
    await fake.waitFor(() => logs.some((l) => l.msg === 'could not join a room berth was invited to'), 10_000);
    const next = fake.createRoom({ members: [alice], invite: true, direct: true });
    await fake.waitFor(() => fake.members(next)[fake.botUserId] === 'join', 10_000);
    expect(fake.members(refused)[fake.botUserId]).toBe('invite');
    expect(logs.some((l) => l.msg.startsWith('rate limited joining a room'))).toBe(false);
  });
});
