// format.js — helpers shared by the dashboard scripts: the JSON API client and number/DOM
// formatting. The API is protobuf's JSON mapping: lowerCamelCase field names, int64 values
// as strings (read them with Number()), enums by name, default-valued scalars present.
'use strict';

const Xmod = (() => {
  // A coordinator started with --token wants it on /api/ calls: open the page as
  // /?token=SECRET and every call carries it as a bearer token.
  const token = new URLSearchParams(location.search).get('token');
  const headers = token ? {Authorization: `Bearer ${token}`} : {};

  // GET `path`; resolves to the parsed JSON, or null on 404 (the API's "none yet"). Other
  // failures reject with the server's {"error": ...} message when it sent one. With
  // `missing`, a 404's message is passed to it.

  async function api(path, missing) {
    const response = await fetch(path, {cache: 'no-store', headers});
    const body = await response.json().catch(() => ({}));
    if (response.status === 404) {
      if (missing) missing(body.error || 'not found');
      return null;
    }
    if (!response.ok) throw new Error(body.error || `${path}: HTTP ${response.status}`);
    return body;
  }

  // 1234567 -> "1.23M"; parameter and token counts.
  function count(n) {
    n = Number(n);
    if (!n) return '';
    if (n >= 1e9) return (n / 1e9).toFixed(2) + 'B';
    if (n >= 1e6) return (n / 1e6).toFixed(2) + 'M';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + 'K';
    return String(n);
  }

  // FLOPs in scientific notation: 1.5e10.
  const flops = v => (Number(v) ? Number(v).toExponential(2).replace('e+', 'e') : '');
  const loss = v => (v === undefined || v === null || !isFinite(v) ? '' : Number(v).toFixed(4));
  const time = ms => (
      Number(ms) ?
          new Date(Number(ms)).toLocaleString(undefined, {dateStyle: 'short', timeStyle: 'short'}) :
          '');

  // Appends <td class=cls>text</td> to `row`; returns the cell.
  function cell(row, text, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  // document.createElement with a class and text.
  function node(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  return {api, count, flops, loss, time, cell, node};
})();
