import { parse, stringify } from 'yaml';
import { parseConfigPath } from '../config/operator-edits.js';
import { closestName } from '../base/did-you-mean.js';
import { BerthError } from '../base/errors.js';
import { own } from '../base/own.js';
import { need, type Command } from './command.js';

/** Settings whose values are secrets: shown as set or not, never printed. */
/** A setting that holds a credential, by its name (token, bot_token, signing_secret, api_key, …; a *_file names a file, not a secret). */
const isSecretKey = (key: string) => /(^|_)(token|secret|password|api_key)$/.test(key);

/** The value with every secret replaced by "(set)". */
function redacted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redacted);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isSecretKey(k) && v !== undefined ? '(set)' : redacted(v)]));
  }
  return value;
}

/** A command-line value as YAML reads it: `8081`, `true`, `[a, b]`, `{ project: sig }`; anything else is text. */
function valueOf(text: string): unknown {
  try {
    return parse(text);
  } catch {
    return text;
  }
}

export const CONFIG_COMMANDS: Record<string, Command> = {
  home: {
    usage: 'home\n  The home this berth uses: --home, $BERTH_HOME, the current directory if it already is one, else ~/.local/share/berth.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 0, '');
      io.out(`${berth().home}\n`);
      return 0;
    },
  },
  'config get': {
    usage:
      'config get [<path>]\n  berth.yaml as berth reads it (defaults filled in; secrets shown as "(set)"), or one setting: a dotted path, e.g. bridges.signal or runs.warm_idle_seconds.',
    options: {},
    async run(berth, _v, pos, io) {
      if (pos.length > 1) need(pos, 1, 'path');
      let value: unknown = berth().config;
      const path = pos[0] === undefined ? [] : parseConfigPath(pos[0]);
      for (const [i, key] of path.entries()) {
        const parent = value && typeof value === 'object' ? (value as Record<string, unknown>) : {};
        value = own(parent, key);
        if (value === undefined) {
          // The path is named once (the field); the reason offers the closest key there.
          const near = closestName(key, Object.keys(parent));
          throw new BerthError('CONFIG_INVALID', 'no such berth.yaml setting', {
            issues: [
              {
                field: pos[0] as string,
                reason: near === undefined ? 'not a setting' : `did you mean "${[...path.slice(0, i), near].join('.')}"?`,
              },
            ],
            hint: 'see "berth config get"',
          });
        }
      }
      io.out(stringify(isSecretKey(path.at(-1) ?? '') ? '(set)' : redacted(value)));
      return 0;
    },
  },
  'config set': {
    usage:
      'config set <path> <value>\n  Set one berth.yaml setting, keeping the file\'s comments; the whole file is checked before it is written, and a bad value changes nothing. The value is YAML: 8081, true, "[a, b]", "{ project: sig }". A running berth serve follows it within seconds.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'path and value');
      const path = parseConfigPath(pos[0] as string);
      await berth().operator.setConfig(path, valueOf(pos[1] as string));
      io.out(`set ${path.join('.')}\n`);
      return 0;
    },
  },
  'config unset': {
    usage: "config unset <path>\n  Remove one berth.yaml setting (its default applies again), keeping the file's comments.",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'path');
      const path = parseConfigPath(pos[0] as string);
      await berth().operator.unsetConfig(path);
      io.out(`unset ${path.join('.')}\n`);
      return 0;
    },
  },
};
