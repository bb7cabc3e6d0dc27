import { describe, expect, it } from 'vitest';
import { chatFailure } from '../../src/bridges/chat-words.js';
import { BerthError } from '../../src/base/errors.js';

describe('what a chat user reads when a message could not be run', () => {
  it('words and what to do next first; the code only after, for the operator', () => {
    const busy = chatFailure('ls', new BerthError('BUSY', 'too many runs'));
    expect(busy).toBe(
      'berth: your message "ls" was not run: berth is busy with other messages right now. Send it again in a minute.\n(for the operator: BUSY: too many runs)',
    );
    const session = chatFailure('ls', new BerthError('CONFIG_INVALID', 'bad id', { issues: [{ field: 'session', reason: 'x' }] }));
    expect(session).toMatch(/^berth: your message "ls" was not run: this conversation cannot take messages\. Start a new one \(\/new\)/);
    expect(chatFailure('ls', new BerthError('RUNTIME_MISSING', 'runsc is gone'))).toMatch(
      /the server needs its operator \("berth doctor" says what\)\. Send it again later\.\n\(for the operator: RUNTIME_MISSING: runsc is gone\)$/,
    );
    expect(chatFailure('ls', new Error('boom'))).not.toContain('boom'); // nothing internal leaks
  });
});
