import { describe, expect, it } from 'vitest';
import { replyText } from '../../src/bridges/reply-words.js';
import { runViewOf } from '../fakes/core-admin.js';

/**
 * A run's answer as a chat without live output shows it (issue 42, item 2): stderr is appended in
 * a short form when the run failed or printed nothing else, never dropped.
 */
describe("a run's answer in a chat", () => {
  it('printed only to stderr and ended 0: the chat shows what it printed, marked as the error output', () => {
    const text = replyText(runViewOf({ stderr: "cat: can't open 'nope.txt': No such file or directory\n" }));
    expect(text).toBe("[stderr]\ncat: can't open 'nope.txt': No such file or directory");
  });

  it('failed: the exit status and the end of stderr, as before', () => {
    expect(replyText(runViewOf({ exit_code: 2, stdout: 'partial\n', stderr: 'boom\n' }))).toBe('partial\n\n[exit 2]\nboom');
  });

  it('a long stderr is cut to its last 1,500 characters, and stdout alone reads as it always did', () => {
    const long = `${'x'.repeat(3000)}THE-END`;
    expect(replyText(runViewOf({ stderr: long }))).toBe(`[stderr]\n${long.slice(-1500)}`);
    expect(replyText(runViewOf({ stdout: 'ok\n', stderr: 'a warning\n' }))).toBe('ok');
    expect(replyText(runViewOf({}))).toBe('(no output)');
  });
});
