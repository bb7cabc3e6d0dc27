/** Text (or any value, as a string) made safe inside HTML text and quoted attributes: &, <, >, " and ' as numeric references. */
export const escapeHtml = (text: unknown) => String(text).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
