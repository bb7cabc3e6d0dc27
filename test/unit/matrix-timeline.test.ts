import { describe, expect, it } from 'vitest';
import { afterArrival, matrixChat, matrixMessage, startsStay } from '../../src/channels/matrix-timeline.js';

/** Where the bot's stay in a room begins, as a table: what came before it is history, never a message. */
const BOT = '@berth:hs';
const msg = (id: string) => ({ type: 'm.room.message', event_id: id, sender: '@a:hs', content: { msgtype: 'm.text', body: id } });
const member = (now: string, before?: string) => ({
  type: 'm.room.member',
  state_key: BOT,
  sender: BOT,
  content: { membership: now },
  ...(before ? { unsigned: { prev_content: { membership: before } } } : {}),
});
const ids = (events: unknown[]) =>
  events.map((e) => (e as { event_id?: string }).event_id ?? (e as { content: { membership: string } }).content.membership);

describe('afterArrival', () => {
  const cases: Array<[string, unknown[], string[]]> = [
    ['no membership of the bot: every event', [msg('a'), msg('b')], ['a', 'b']],
    [
      'invited, then joined: what came after the invite',
      [msg('old'), member('invite'), msg('while-invited'), member('join', 'invite'), msg('after')],
      ['while-invited', 'join', 'after'],
    ],
    ['joined after an invite not among the events: after the join', [msg('old'), member('join', 'invite'), msg('after')], ['after']],
    ['joined a public room (no invite): after the join', [msg('old'), member('join', 'leave'), msg('after')], ['after']],
    ['a profile change is not an arrival', [msg('a'), member('join', 'join'), msg('b')], ['a', 'join', 'b']],
    [
      'left and invited again: the second stay only',
      [
        member('join', 'invite'),
        msg('first-stay'),
        member('leave', 'join'),
        msg('away'),
        member('invite', 'leave'),
        msg('invited-again'),
        member('join', 'invite'),
        msg('back'),
      ],
      ['invited-again', 'join', 'back'],
    ],
  ];
  for (const [name, events, expected] of cases) it(name, () => expect(ids(afterArrival(events, BOT))).toEqual(expected));

  it('paging back stops at the invite or a join without one, not at a join after an invite or a profile change', () => {
    expect(
      [member('invite'), member('join', 'leave'), member('join'), member('join', 'invite'), member('join', 'join'), msg('x')].map((e) =>
        startsStay(e, BOT),
      ),
    ).toEqual([true, true, true, false, false, false]);
  });
});

describe('matrixChat and threads', () => {
  it("a thread message is the thread's chat; the chat reads back as room and thread; a malformed root is the room", () => {
    const inThread = {
      ...msg('$m'),
      content: { msgtype: 'm.text', body: 'x', 'm.relates_to': { rel_type: 'm.thread', event_id: '$root' } },
    };
    expect(matrixMessage('!r:hs', inThread, BOT, false)?.chat).toBe('!r:hs/$root');
    expect(matrixChat('!r:hs/$root')).toEqual({ room: '!r:hs', thread: '$root' });
    expect(matrixChat('!r:hs')).toEqual({ room: '!r:hs' });
    const bad = { ...inThread, content: { ...inThread.content, 'm.relates_to': { rel_type: 'm.thread', event_id: '$a/b' } } };
    expect(matrixMessage('!r:hs', bad, BOT, false)?.chat).toBe('!r:hs');
  });
});
