import { names } from './bins.js';
import type { PathIntent } from './path-intent.js';

const TEST_FILE_UNARY = new Set(names('-e -f -d -r -w -x -s -L -h -b -c -p -S -u -g -k -O -G -N'));
const TEST_FILE_BINARY = new Set(names('-nt -ot -ef'));

/** test's expression: the operands of file tests are reads (their existence is information); the rest is text. */
export function testIntent(args: string[], intent: PathIntent) {
  args.forEach((a, i) => {
    const next = args[i + 1];
    const prev = args[i - 1];
    if (TEST_FILE_UNARY.has(a) && next !== undefined) intent.reads.push(next);
    if (TEST_FILE_BINARY.has(a)) intent.reads.push(...[prev, next].filter((x): x is string => x !== undefined));
  });
}
