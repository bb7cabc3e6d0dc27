/**
 * "Did you mean …?" for a name someone typed (a command, an option, a berth.yaml key, a model
 * upstream): the closest known name, by edit distance. The one place that decides what is close.
 */

/** Longer input gets no suggestion: the table is O(a·b), and a long mistyped name is not a typo. */
export const SUGGEST_MAX_LENGTH = 64;

/**
 * Optimal string alignment distance (Damerau–Levenshtein without repeated edits of one
 * substring): insertions, deletions, substitutions and swaps of two neighbours cost 1 each.
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row.push(best);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * The known name closest to `typed`, if one is close enough to be a slip: at most a third of
 * its characters off (at least one), case aside. Ties go to the earlier candidate.
 */
export function closestName(typed: string, known: Iterable<string>): string | undefined {
  if (!typed || typed.length > SUGGEST_MAX_LENGTH) return undefined;
  const word = typed.toLowerCase();
  const limit = Math.max(1, Math.floor(word.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    if (name === typed || name.length > SUGGEST_MAX_LENGTH || Math.abs(name.length - word.length) > limit) continue;
    const distance = editDistance(word, name.toLowerCase());
    if (distance <= limit && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** `; did you mean "x"?` to append to an error's reason, or nothing. */
export function didYouMean(typed: string, known: Iterable<string>): string {
  const name = closestName(typed, known);
  return name === undefined ? '' : `; did you mean "${name}"?`;
}
