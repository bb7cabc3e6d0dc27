import { describe, expect, it } from 'vitest';
import { chatCommand, type CommandAdmin, type CommandContext } from '../../src/bridges/commands.js';
import { BerthError } from '../../src/base/errors.js';

/** /whoami in a chat user's words (issue 42.8): who they are here, the conversation, what the level lets the agent do, the folder. */
const ctx = (session?: { level: 'low' | 'medium'; workspace: string }): CommandContext => {
  const admin = {
    getSession: () => {
      if (!session) throw new BerthError('SESSION_NOT_FOUND', 'no such session');
      return { settings: { permission_level: session.level, workspace: { id: session.workspace } } };
    },
  } as unknown as CommandAdmin;
  return {
    admin,
    project: 'demo',
    tenant: 'signal:+4915550001',
    sender: 'signal:+4915550001',
    sessionId: 'chat-abc-1',
    newSession: () => 'chat-abc-2',
  };
};

describe('/whoami', () => {
  it('a conversation not yet started: said so, at the level a new one gets, its folder made at the first message', async () => {
    expect(await chatCommand('/whoami')!(ctx())).toBe(
      [
        'You are signal:+4915550001, talking to the agent of project demo.',
        'This conversation: chat-abc-1 (new: it starts with your next message); /new starts another.',
        "Your agent's level: medium: it works in your folder and may reach the hosts this project allows.",
        'Your folder: (made at your first message).',
      ].join('\n'),
    );
  });

  it('at level low: no network, in words', async () => {
    const words = await chatCommand('/whoami')!(ctx({ level: 'low', workspace: 'w-1234' }));
    expect(words.split('\n').slice(1)).toEqual([
      'This conversation: chat-abc-1; /new starts another.',
      "Your agent's level: low: it works in your folder with no network.",
      'Your folder: w-1234.',
    ]);
  });
});
