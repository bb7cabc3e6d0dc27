import { deny } from './deny.js';

// Anything a shell would interpret: chaining, pipes, redirects, substitution, globbing, expansion.
const OPERATORS = /[;&|<>`$(){}\n\\*?[\]~]/;

/** Split a command string into argv like a shell would for plain words and quotes, and nothing more. */
export function splitCommand(command: string): string[] {
  const argv: string[] = [];
  let current = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = null;
      else if (quote === '"' && OPERATORS.test(ch)) throw deny('shell_operator', `"${ch}" is not allowed: commands run without a shell`);
      else current += ch;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === ' ' || ch === '\t') {
      if (inWord) argv.push(current);
      current = '';
      inWord = false;
    } else if (OPERATORS.test(ch)) {
      throw deny('shell_operator', `"${ch}" is not allowed: commands run without a shell (no ; | & > < \` $() and friends)`);
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote) throw deny('shell_syntax', 'unterminated quote');
  if (inWord) argv.push(current);
  return argv;
}
