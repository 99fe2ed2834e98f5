// The headless Chromium the dashboard's browser tests drive (/usr/bin/chromium through
// playwright-core), quiet: no sandbox, GPU, QUIC, first-run or background traffic.
export function launchChromium(chromium) {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'
    ],
  });
}
