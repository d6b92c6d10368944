// Prepares report.html for a webview: the report refers to its plots by relative path, which a
// webview resolves only against a <base> pointing at the webview URI of the report's folder; a
// Content-Security-Policy limits it to those local files, with scripts left off.

export function reportHtmlForWebview(html: string, baseHref: string, cspSource: string): string {
  const base = baseHref.endsWith("/") ? baseHref : `${baseHref}/`;
  const csp =
    `default-src 'none'; img-src ${cspSource} data:; ` +
    `style-src ${cspSource} 'unsafe-inline'; font-src ${cspSource};`;
  const head =
    `<meta http-equiv="Content-Security-Policy" content="${csp}">` +
    `<base href="${escapeAttribute(base)}">`;
  const openHead = /<head(\s[^>]*)?>/i.exec(html);
  if (openHead !== null) {
    const at = openHead.index + openHead[0].length;
    return html.slice(0, at) + head + html.slice(at);
  }
  return `<!DOCTYPE html><html><head>${head}</head><body>${html}</body></html>`;
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}
