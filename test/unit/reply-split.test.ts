import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelContext, ChannelTransport } from '../../src/channels/contract.js';
import { createMatrixBridge, MatrixBridgeSchema } from '../../src/channels/matrix.js';
import { createSlackBridge, SlackBridgeSchema } from '../../src/channels/slack.js';
import { splitForLimit } from '../../src/channels/telegram-text.js';
import { graphemeCut, splitParts } from '../../src/channels/text-cut.js';
import { startFakeMatrix, type FakeMatrix } from '../fakes/matrix.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack.js';

/**
 * A reply cut into parts at a channel's limit arrives whole: no part ends or starts with half a
 * character (Synapse answers 500 and tdlib refuses such a text: the whole reply was lost), an
 * emoji made of several code points stays one, and a Matrix body the homeserver would refuse as
 * too large (control characters are 6 bytes each in its JSON) is split further, not lost.
 */
const SMILE = '😀';
const FAMILY = '👩🏽‍👩🏽‍👧🏽‍👦🏽'; // one grapheme: 4 people with skin tones, joined by ZWJ
const wellFormed = (s: string) => !/\p{Cs}/u.test(s);
const graphemes = (s: string) => [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(s)].map((g) => g.segment);

let closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

function context<C>(config: C): ChannelContext<C> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-split-'));
  closers.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  return { config, logger: pino({ level: 'silent' }), dir, take: () => 'accepted', postOut: async () => ({ status: 200 }) };
}

async function matrix(): Promise<{ fake: FakeMatrix; bridge: ChannelTransport; room: string }> {
  const fake = await startFakeMatrix();
  closers.push(() => fake.close());
  const room = fake.createRoom({ members: [`@alice:${fake.serverName}`], direct: true });
  const bridge = createMatrixBridge(
    context(MatrixBridgeSchema.parse({ homeserver: fake.url, user_id: fake.botUserId, access_token: fake.botAccessToken })),
  );
  return { fake, bridge, room };
}

describe('Telegram: splitForLimit', () => {
  it('a line longer than a part, with an emoji at the cut, is cut before the emoji, not through it', () => {
    const text = `${'a'.repeat(4087)}${SMILE}${'b'.repeat(100)}`;
    const parts = splitForLimit(text, 4096);
    expect(parts.length).toBe(2);
    expect(parts.every(wellFormed)).toBe(true);
    expect(parts.join('')).toBe(text);
  });

  it('an emoji of several code points (skin tones, ZWJ) at the cut stays whole in one part', () => {
    for (let pad = 4070; pad <= 4090; pad++) {
      const text = `${'a'.repeat(pad)}${FAMILY}${'b'.repeat(50)}`;
      const parts = splitForLimit(text, 4096);
      expect(parts.join(''), String(pad)).toBe(text);
      expect(parts.filter((p) => p.includes(FAMILY)).length, String(pad)).toBe(1);
    }
  });
});

describe('Matrix: send', () => {
  it('an astral character at the 12,000 cut: every part is accepted by the homeserver and the reply reads whole', async () => {
    const { fake, bridge, room } = await matrix();
    const text = `${'a'.repeat(11_999)}${SMILE}${'b'.repeat(100)}`;
    await bridge.send(room, text, { answerTo: '$x' });
    const bodies = fake.repliesIn(room).map((e) => String(e.content.body));
    expect(bodies.length).toBe(2);
    expect(bodies.every(wellFormed)).toBe(true);
    expect(bodies.join('')).toBe(text);
  });

  it('a grapheme of several code points at the cut stays in one part', async () => {
    const { fake, bridge, room } = await matrix();
    const text = `${'a'.repeat(11_995)}${FAMILY}${'b'.repeat(10)}`;
    await bridge.send(room, text);
    const bodies = fake.repliesIn(room).map((e) => String(e.content.body));
    expect(bodies.join('')).toBe(text);
    expect(bodies.some((b) => graphemes(b).includes(FAMILY))).toBe(true);
  });

  it('12,000 control characters (too large for the homeserver as one event) arrive, split into parts it accepts', async () => {
    const { fake, bridge, room } = await matrix();
    const text = '\u0001'.repeat(12_000);
    await bridge.send(room, text);
    const bodies = fake.repliesIn(room).map((e) => String(e.content.body));
    expect(bodies.length).toBeGreaterThan(1);
    expect(bodies.join('')).toBe(text);
  });

  it('a homeserver with a lower size limit (M_TOO_LARGE for a part) gets that part in halves, not nothing', async () => {
    const { fake, bridge, room } = await matrix();
    fake.failNext('/send/', { status: 413, errcode: 'M_TOO_LARGE', error: 'event too large' });
    const text = `${'x'.repeat(4000)}${SMILE}${'y'.repeat(4000)}`;
    await bridge.send(room, text, { answerTo: '$big' });
    const bodies = fake.repliesIn(room).map((e) => String(e.content.body));
    expect(bodies.length).toBe(2);
    expect(bodies.every(wellFormed)).toBe(true);
    expect(bodies.join('')).toBe(text);
  });
});

describe('splitParts and graphemeCut', () => {
  it('a single cluster longer than a part (a letter under hundreds of combining marks) is cut between code points, never through a pair', () => {
    const zalgo = `a${'\u0301'.repeat(300)}${SMILE.repeat(200)}`;
    const parts = splitParts(zalgo, { units: 101, parts: 100 });
    expect(parts.join('')).toBe(zalgo);
    expect(parts.every(wellFormed)).toBe(true);
    expect(parts.every((p) => p.length <= 101)).toBe(true);
  });

  it('more than the parts allowed: the last part says the reply was cut, within the limit', () => {
    const parts = splitParts(SMILE.repeat(100), { units: 51, parts: 2 });
    expect(parts).toHaveLength(2);
    expect(parts[1]).toMatch(/the reply was cut here\]$/);
    expect(parts.every((p) => p.length <= 51 && wellFormed(p))).toBe(true);
    expect(graphemeCut(`ab${SMILE}`, 3)).toBe(2);
  });
});

describe('Slack: send', () => {
  it('an emoji at the 3,900 cut is not cut into two halves', async () => {
    const fake: FakeSlack = await startFakeSlack();
    closers.push(() => fake.close());
    const bridge = createSlackBridge(
      context(
        SlackBridgeSchema.parse({
          mode: 'events',
          bot_token: fake.botToken,
          signing_secret: fake.signingSecret,
          api_url: fake.apiUrl.replace(/\/$/, ''),
        }),
      ),
    );
    const text = `${'a'.repeat(3899)}${SMILE}${'b'.repeat(5000)}`;
    await bridge.send('D0ALICE0001', text);
    const posted = fake.posted.map((p) => p.text);
    expect(posted.length).toBe(3);
    expect(posted.every(wellFormed)).toBe(true);
    expect(posted.join('')).toBe(text);
  });
});
