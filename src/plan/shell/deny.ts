import { BerthError } from '../../base/errors.js';

/** Every refusal of the shell policy: PERMISSION_DENIED, with the rule that refused it. */
export function deny(rule: string, message: string): BerthError {
  return new BerthError('PERMISSION_DENIED', message, { rule });
}

/** An option, value or form of a binary that the table (or its grammar) does not allow. */
export const notAllowed = (bin: string, what: string) => deny('option_not_allowed', `"${bin}" ${what} is not allowed`);
