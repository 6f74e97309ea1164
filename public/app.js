// Sends the link form without leaving the page and shows the program's answer in it.
// Without this script the form still works: the program answers a page of its own.
//
// Screen readers hear each change once, from one polite live region (#status): when the work
// starts, once if it takes long, when the answer comes, and at the start and end of a wait.
// What changes every second (the seconds working, the time left) is shown in #result, which is
// not a live region, so it can be read at any time without being spoken every second.
(function () {
  'use strict';

  var form = document.getElementById('resolve-form');
  var input = document.getElementById('link');
  var button = document.getElementById('submit');
  var result = document.getElementById('result');
  var status = document.getElementById('status');
  var footer = document.getElementById('site-footer');
  if (!form || !input || !button || !result || !status || !window.fetch || !window.URLSearchParams) {
    return;
  }

  var IDLE_LABEL = button.textContent;
  var BUSY_LABEL = 'Working…';
  var LOCKED_LABEL = 'Please wait';
  // The provider may take up to 35 s (it may poll); past this the page gives up on the answer.
  var REQUEST_TIMEOUT_MS = 60000;
  // After this long the status says once more that it is still working.
  var STILL_WORKING_AFTER_S = 10;
  // Only a 429 (this visitor asked too often) locks the button, and only when its wait is at
  // most this long: a per-minute limit counts down with the button locked. A longer wait (a
  // limit per hour or day), and any 503 (the site's spend limit, a busy provider, a site not
  // set up), is shown in words and leaves the button usable: trying again costs the site one
  // refused request and never a paid call, and a page locked for hours helps nobody.
  var MAX_LOCK_SECONDS = 120;
  // Longer waits than this (a month) are not believed.
  var MAX_WAIT_SECONDS = 31 * 86400;
  var NOT_SET_UP = 'This site is not set up yet, so it cannot get download links. Please try again later.';

  // What the program says first in a wait sentence, by its code; the time left follows.
  var WAIT_LEADS = {
    rate_limited: 'Too many requests.',
    spend_limit: 'The service has reached its limit for now.',
    provider_busy: 'The download service is busy.',
    provider_unavailable: 'The download service is not available right now.',
    host_unavailable: 'The file host is unavailable for now.',
    store_unavailable: 'The service is briefly unavailable.',
    challenge_unavailable: 'The check that you are a person is not available right now.'
  };

  var busy = false;
  var locked = false;
  // The timer that asks again about a job the service is still preparing.
  var again = 0;
  // The one timer that updates #result every second (working, or a wait).
  var ticker = 0;
  var announceTimer = 0;

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (busy || locked) {
      return;
    }
    var links = linesOf(input.value);
    if (links.length > 1) {
      sendMany(links);
    } else {
      send(links.length ? links[0] : input.value.trim());
    }
  });

  // Enter sends, as in a one-line field; Shift+Enter starts a new line (a pasted list keeps
  // its lines).
  input.addEventListener('keydown', function (event) {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (typeof form.requestSubmit === 'function') {
        form.requestSubmit();
      } else {
        button.click();
      }
    }
  });

  // A click on the button while it is marked disabled does nothing (it is not really disabled,
  // so that it keeps keyboard focus).
  button.addEventListener('click', function (event) {
    if (busy || locked) {
      event.preventDefault();
    }
  });

  // The button busy and the working card shown while a request is out.
  function begin() {
    stopList();
    clearTimeout(again);
    busy = true;
    setButton('busy');
    form.setAttribute('aria-busy', 'true');
    showWorking();
  }

  // Posts `fields` (with a solved challenge's token) and hands the answer to
  // `answered(code, headers, data)`; a timeout or a failed connection is shown here.
  function post(fields, answered) {
    var controller = typeof AbortController === 'function' ? new AbortController() : null;
    var timedOut = false;
    var timeout = setTimeout(function () {
      timedOut = true;
      if (controller) {
        controller.abort();
      }
    }, REQUEST_TIMEOUT_MS);

    var code = 0;
    var headers = null;
    fetch(form.action, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        'Accept': 'application/json'
      },
      body: withChallengeToken(new URLSearchParams(fields)).toString(),
      cache: 'no-store',
      credentials: 'same-origin',
      signal: controller ? controller.signal : undefined
    })
      .then(function (response) {
        code = response.status;
        headers = response.headers;
        return response.text();
      })
      .then(function (text) {
        return { ok: true, text: text };
      }, function () {
        return { ok: false };
      })
      .then(function (outcome) {
        clearTimeout(timeout);
        busy = false;
        form.removeAttribute('aria-busy');
        stopTicker();
        if (outcome.ok) {
          answered(code, headers, parseJson(outcome.text));
        } else if (timedOut) {
          showError('The server took too long to answer. Please try again.');
        } else if (code) {
          showError(fallbackMessage(code));
        } else {
          showError('Could not reach the server. Check your internet connection and try again.');
        }
      });
  }

  function send(link) {
    begin();
    post({ link: link }, function (code, headers, data) {
      handle(code, headers, data, link);
    });
  }

  function showWorking() {
    var box = card('busy');
    var title = addText(box, 'p', 'Getting your download link…');
    title.className = 'title';
    var elapsed = addText(box, 'p', '');
    elapsed.className = 'elapsed';
    var bar = document.createElement('div');
    bar.className = 'bar';
    bar.setAttribute('aria-hidden', 'true');
    box.appendChild(bar);
    announce('Getting your download link. This can take up to half a minute.');

    var started = Date.now();
    var shown = -1;
    function tick() {
      var seconds = Math.floor((Date.now() - started) / 1000);
      if (seconds === shown) {
        return;
      }
      shown = seconds;
      elapsed.textContent = seconds === 0
        ? 'Just started. This can take up to half a minute.'
        : seconds < STILL_WORKING_AFTER_S
        ? 'Working for ' + secondsWords(seconds) + '. This can take up to half a minute.'
        : 'Still working, for ' + secondsWords(seconds) + ': some file hosts take up to half a minute.';
      if (seconds === STILL_WORKING_AFTER_S) {
        announce('Still working.');
      }
    }
    tick();
    ticker = setInterval(tick, 250);
  }

  function handle(code, headers, data, link) {
    // The answer asks for the challenge (403 challenge_required, or a 429 that offers one):
    // only then is the widget's script loaded.
    if (data && data.challenge && typeof data.challenge.site_key === 'string') {
      showChallenge(data, link);
      return;
    }
    sayAllowance(allowanceFromHeaders(headers));
    // 202: the service is still preparing the file (paid for once, kept): its progress in
    // words, and the same link asked again after Retry-After, which joins the same job.
    if (code === 202 && data && data.status === 'pending') {
      showPending(data, Math.max(retryAfterSeconds(data, headers), 1), link);
      return;
    }
    if (code >= 200 && code < 300) {
      if (data && Array.isArray(data.files) && data.files.length > 1) {
        showFiles(data.files);
      } else if (data && typeof data.download === 'string' && data.download) {
        showDownload(data.download, typeof data.filename === 'string' ? data.filename : '');
      } else {
        showError('The server answered without a download link. Please try again.');
      }
      return;
    }

    var problem = data && typeof data.code === 'string' ? data.code : '';
    if (problem === 'not_configured') {
      showNotSetUp(true);
      return;
    }
    var detail = data && typeof data.detail === 'string' && data.detail.trim()
      ? data.detail.trim()
      : fallbackMessage(code);
    var wait = retryAfterSeconds(data, headers);
    if (wait > 0 && (code === 429 || code === 503)) {
      var lead = WAIT_LEADS[problem] || (code === 429 ? WAIT_LEADS.rate_limited : 'The service is not available right now.');
      showWait(lead, wait, code === 429 && wait <= MAX_LOCK_SECONDS);
    } else {
      showError(detail);
    }
  }

  // The challenge: the widget's token, kept for the next request only.
  var challengeToken = '';
  var challengeScript = null;

  function withChallengeToken(params) {
    if (challengeToken) {
      params.set('cf-turnstile-response', challengeToken);
      challengeToken = '';
    }
    return params;
  }

  // The program's sentence, and the widget under it; solved, the same link (or, given `again`,
  // whatever was asked) is sent again with its token. Keyboard users find the widget next
  // after the button; screen readers hear that a check is asked for.
  function showChallenge(data, link, again) {
    var offer = data.challenge;
    var box = card('challenge');
    var detail = typeof data.detail === 'string' && data.detail.trim()
      ? data.detail.trim()
      : 'Please confirm you are a person, then ask again.';
    addText(box, 'p', detail).className = 'message';
    var holder = document.createElement('div');
    holder.className = 'challenge-widget';
    holder.setAttribute('role', 'group');
    holder.setAttribute('aria-label', 'Check that you are a person');
    box.appendChild(holder);
    announce(detail + ' The check is below the button.');
    setButton('idle');

    function render() {
      try {
        window.turnstile.render(holder, {
          sitekey: offer.site_key,
          action: typeof offer.action === 'string' ? offer.action : undefined,
          theme: 'auto',
          callback: function (token) {
            challengeToken = token;
            if (again) {
              again();
            } else {
              send(link);
            }
          },
          'error-callback': function () {
            showError('The check could not be shown. Please reload the page and try again.');
            return true;
          }
        });
      } catch (e) {
        showError('The check could not be shown. Please reload the page and try again.');
      }
    }
    if (window.turnstile && typeof window.turnstile.render === 'function') {
      render();
      return;
    }
    var url = httpUrl(offer.script_url);
    if (!url) {
      showError('The check could not be shown. Please try again later.');
      return;
    }
    if (!challengeScript) {
      challengeScript = document.createElement('script');
      challengeScript.src = url + (url.indexOf('?') < 0 ? '?' : '&') + 'render=explicit';
      challengeScript.async = true;
      document.head.appendChild(challengeScript);
    }
    challengeScript.addEventListener('load', render);
    challengeScript.addEventListener('error', function () {
      showError('The check could not be loaded. Please check your connection and try again.');
    });
  }

  function showDownload(download, filename) {
    var href = httpUrl(download);
    if (!href) {
      var bad = card('error');
      addText(bad, 'p', 'The server answered an address that is not a web link, so it is not shown as a link:');
      addText(bad, 'p', download).className = 'url';
      announce('The server answered an address that is not a web link.');
      setButton('idle');
      return;
    }

    var box = card('ok');
    addText(box, 'p', 'Your download link is ready:').className = 'title';
    var line = document.createElement('p');
    line.className = 'link';
    var link = document.createElement('a');
    link.href = href;
    link.rel = 'noreferrer noopener';
    if (filename) {
      link.textContent = filename;
    } else {
      addLinkText(link, href);
    }
    line.appendChild(link);
    box.appendChild(line);
    if (filename) {
      var url = document.createElement('p');
      url.className = 'url';
      addLinkText(url, href);
      box.appendChild(url);
    }

    var actions = document.createElement('div');
    actions.className = 'actions';
    var copyButton = document.createElement('button');
    copyButton.type = 'button';
    copyButton.textContent = 'Copy link';
    var copied = document.createElement('span');
    copied.className = 'copied';
    copyButton.addEventListener('click', function () {
      copyText(href, copyButton).then(function (ok) {
        var said = ok ? 'Copied.' : 'Could not copy: select the link and copy it by hand.';
        copied.textContent = said;
        announce(said);
      });
    });
    actions.appendChild(copyButton);
    actions.appendChild(copied);
    box.appendChild(actions);
    announce('Your download link is ready: ' + (filename || 'the link') + '.');
    setButton('idle');
  }

  function showPending(data, seconds, link) {
    var box = card('busy');
    var words = typeof data.detail === 'string' && data.detail.trim()
      ? data.detail.trim()
      : 'The download service is preparing this file.';
    addText(box, 'p', words).className = 'title';
    addText(box, 'p', 'This page asks again by itself; nothing more is paid for it.').className = 'elapsed';
    announce(words);
    // Another link sent meanwhile cancels this (send clears the timer).
    setButton('idle');
    again = setTimeout(function () {
      send(link);
    }, seconds * 1000);
  }

  // Several files (a folder): every one as a link, under one title.
  function showFiles(files) {
    var box = card('ok');
    addText(box, 'p', 'Your download links are ready (' + files.length + ' files):').className = 'title';
    var list = document.createElement('ul');
    for (var i = 0; i < files.length; i++) {
      var f = files[i] || {};
      var href = typeof f.download === 'string' ? httpUrl(f.download) : '';
      if (!href) {
        continue;
      }
      var item = document.createElement('li');
      var a = document.createElement('a');
      a.href = href;
      a.rel = 'noreferrer noopener';
      a.textContent = typeof f.filename === 'string' && f.filename ? f.filename : href;
      item.appendChild(a);
      list.appendChild(item);
    }
    box.appendChild(list);
    announce('Your download links are ready: ' + files.length + ' files.');
    setButton('idle');
  }

  // A web address that lines break only after a / or a ?: the parts between never wrap
  // (.seg in style.css), a <wbr> follows each / and ? (as the program's own pages write it).
  function addLinkText(parent, url) {
    var parts = url.match(/[^/?]*[/?]|[^/?]+$/g) || [];
    for (var i = 0; i < parts.length; i++) {
      var seg = document.createElement('span');
      seg.className = 'seg';
      seg.textContent = parts[i];
      parent.appendChild(seg);
      if (/[/?]$/.test(parts[i])) {
        parent.appendChild(document.createElement('wbr'));
      }
    }
  }

  function showError(message) {
    addText(card('error'), 'p', message).className = 'message';
    announce(message);
    setButton('idle');
  }

  function showNotSetUp(announced) {
    var box = card('error');
    box.setAttribute('data-code', 'not_configured');
    addText(box, 'p', NOT_SET_UP).className = 'message';
    if (announced) {
      announce(NOT_SET_UP);
    }
    setButton('idle');
  }

  // One sentence that stays true while it counts: "Too many requests. You can try again in 42
  // seconds." Spoken when the wait starts and when it ends, not every second.
  function showWait(lead, seconds, lock) {
    var box = card('wait');
    var sentence = addText(box, 'p', '');
    sentence.className = 'message';
    var deadline = Date.now() + seconds * 1000;
    locked = lock;
    setButton(lock ? 'locked' : 'idle');

    function say(left) {
      return lead + ' You can try again in ' + waitWords(left) + '.';
    }
    var shown = '';
    function tick() {
      var left = Math.ceil((deadline - Date.now()) / 1000);
      if (left <= 0) {
        stopTicker();
        sentence.textContent = 'You can try again now.';
        locked = false;
        setButton('idle');
        announce('You can try again now.');
        return;
      }
      var text = say(left);
      if (text !== shown) {
        shown = text;
        sentence.textContent = text;
      }
    }
    tick();
    announce(sentence.textContent);
    ticker = setInterval(tick, 250);
  }

  function stopTicker() {
    if (ticker) {
      clearInterval(ticker);
      ticker = 0;
    }
  }

  // As the program says it (src/http/render.rs wait_words): seconds under two minutes, then
  // about so many minutes, hours or days, rounded up.
  function waitWords(seconds) {
    if (seconds < 120) {
      return secondsWords(seconds);
    }
    if (seconds < 7200) {
      return 'about ' + Math.ceil(seconds / 60) + ' minutes';
    }
    if (seconds < 172800) {
      return 'about ' + Math.ceil(seconds / 3600) + ' hours';
    }
    return 'about ' + Math.ceil(seconds / 86400) + ' days';
  }

  function secondsWords(n) {
    return n === 1 ? '1 second' : n + ' seconds';
  }

  function retryAfterSeconds(data, headers) {
    var seconds = 0;
    if (data && typeof data.retry_after === 'number' && isFinite(data.retry_after)) {
      seconds = Math.ceil(data.retry_after);
    } else if (headers) {
      var value = (headers.get('Retry-After') || '').trim();
      if (/^\d+$/.test(value)) {
        seconds = parseInt(value, 10);
      } else if (value) {
        var when = Date.parse(value);
        if (!isNaN(when)) {
          seconds = Math.ceil((when - Date.now()) / 1000);
        }
      }
    }
    return Math.min(Math.max(seconds, 0), MAX_WAIT_SECONDS);
  }

  function fallbackMessage(code) {
    switch (code) {
      case 400: return 'That link was not accepted. Check that it is the complete address of the file.';
      case 404: return 'The link service was not found on this site.';
      case 405: return 'The server did not accept this kind of request.';
      case 408: return 'The request took too long. Please try again.';
      case 413: return 'That link is too long.';
      case 429: return 'Too many requests. Please wait a moment and try again.';
      case 500: return 'The server had a problem. Please try again later.';
      case 502: return 'The link service gave an answer that could not be used. Please try again later.';
      case 503: return 'The link service is not available right now. Please try again later.';
      case 504: return 'The link service took too long to answer. Please try again later.';
    }
    if (code >= 500) {
      return 'The server had a problem (error ' + code + '). Please try again later.';
    }
    return 'The request failed (error ' + code + '). Please try again.';
  }

  // Says `text` once in the live region. Emptied first, so that the same words said twice
  // (two refusals in a row) are spoken twice.
  function announce(text) {
    clearTimeout(announceTimer);
    status.textContent = '';
    announceTimer = setTimeout(function () {
      status.textContent = text;
    }, 100);
  }

  // idle: usable. busy or locked: marked disabled (aria-disabled), keeping focus where it is.
  function setButton(state) {
    if (state === 'idle') {
      button.removeAttribute('aria-disabled');
      button.textContent = IDLE_LABEL;
    } else {
      button.setAttribute('aria-disabled', 'true');
      button.textContent = state === 'busy' ? BUSY_LABEL : LOCKED_LABEL;
    }
  }

  // The owner's footer (site name, contact, terms) and whether the site is set up, from the
  // program: the configuration holds them, outside the web root.
  function about() {
    fetch(form.action + '?about=1', {
      headers: { 'Accept': 'application/json' },
      credentials: 'same-origin'
    })
      .then(function (response) {
        return response.text().then(function (text) {
          return { code: response.status, data: parseJson(text) };
        });
      })
      .then(function (answer) {
        var data = answer.data || {};
        var notSetUp = (answer.code === 503 && data.code === 'not_configured') ||
          (answer.code === 200 && data.ready === false);
        if (notSetUp && !busy && !locked && !result.firstChild) {
          showNotSetUp(false);
        }
        if (answer.code === 200) {
          showFooter(data);
        }
      }, function () {});
  }

  function showFooter(data) {
    if (!footer) {
      return;
    }
    var line = document.createElement('p');
    function part(node) {
      if (line.firstChild) {
        var dot = addText(line, 'span', ' · ');
        dot.setAttribute('aria-hidden', 'true');
      }
      line.appendChild(node);
    }
    if (typeof data.site_name === 'string' && data.site_name) {
      var name = document.createElement('span');
      name.className = 'site-name';
      name.textContent = data.site_name;
      part(name);
    }
    var contact = typeof data.contact_href === 'string' ? data.contact_href : '';
    if (/^mailto:/i.test(contact) || httpUrl(contact)) {
      var mail = /^mailto:/i.test(contact);
      part(footerLink(contact, mail ? 'Contact: ' + data.contact : 'Contact', 'contact'));
    }
    var terms = typeof data.terms_url === 'string' ? httpUrl(data.terms_url) : '';
    if (terms) {
      part(footerLink(terms, 'Terms of use', 'terms'));
    }
    if (line.firstChild) {
      clear(footer);
      footer.appendChild(line);
      footer.hidden = false;
    }
  }

  function footerLink(href, text, kind) {
    var a = document.createElement('a');
    a.href = href;
    a.className = kind;
    a.textContent = text;
    return a;
  }

  // Only http and https addresses may become links: never javascript: or data:.
  function httpUrl(value) {
    var url;
    try {
      url = new URL(value);
    } catch (e) {
      return '';
    }
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : '';
  }

  function parseJson(text) {
    try {
      var value = JSON.parse(text);
      return value && typeof value === 'object' ? value : null;
    } catch (e) {
      return null;
    }
  }

  function copyText(text, returnFocus) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(function () {
        return true;
      }, function () {
        return copyBySelection(text, returnFocus);
      });
    }
    return Promise.resolve(copyBySelection(text, returnFocus));
  }

  function copyBySelection(text, returnFocus) {
    var area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'offscreen';
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try {
      ok = document.execCommand('copy');
    } catch (e) {
      ok = false;
    }
    document.body.removeChild(area);
    returnFocus.focus();
    return ok;
  }

  function card(kind) {
    stopTicker();
    clear(result);
    var box = document.createElement('div');
    box.className = 'card ' + kind;
    result.appendChild(box);
    return box;
  }

  function addText(parent, tag, text) {
    var node = document.createElement(tag);
    node.textContent = text;
    parent.appendChild(node);
    return node;
  }

  function clear(node) {
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
  }

  // ---- Several links: one request, a list of answers, each link in its own state. ----

  // The links of the box: one a line, blank lines dropped, each once, in order.
  function linesOf(text) {
    var seen = {};
    var out = [];
    var lines = String(text).split(/\r?\n/);
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i].trim();
      if (line && !seen[line]) {
        seen[line] = true;
        out.push(line);
      }
    }
    return out;
  }

  // The list's timers: the one that counts the waits down, and the polls of links under way.
  var listTicker = 0;
  var listPolls = [];

  function stopList() {
    if (listTicker) {
      clearInterval(listTicker);
      listTicker = 0;
    }
    for (var i = 0; i < listPolls.length; i++) {
      clearTimeout(listPolls[i]);
    }
    listPolls = [];
  }

  function sendMany(links) {
    begin();
    announce('Getting ' + links.length + ' download links. This can take up to a minute.');
    post({ links: links.join('\n') }, function (code, headers, data) {
      if (data && Array.isArray(data.links)) {
        showList(data);
      } else if (data && data.challenge && typeof data.challenge.site_key === 'string') {
        // The challenge is asked once for the whole paste: solved, every link goes again.
        showChallenge(data, links[0], function () { sendMany(links); });
      } else {
        handle(code, headers, data, links[0]);
      }
    });
  }

  // The list: a title that counts what is ready, an item a link, "Copy all links", and what
  // is left of the allowance. The links not ready go back into the box to send again.
  function showList(data) {
    var box = card('list');
    box.setAttribute('data-code', 'list');
    var title = addText(box, 'p', '');
    title.className = 'title';
    var list = document.createElement('ol');
    list.className = 'links';
    box.appendChild(list);
    var items = [];
    for (var i = 0; i < data.links.length; i++) {
      var entry = data.links[i] || {};
      var li = document.createElement('li');
      list.appendChild(li);
      var item = { li: li, entry: entry, deadline: 0, said: '' };
      items.push(item);
      drawItem(item);
    }
    var actions = document.createElement('div');
    actions.className = 'actions';
    var copyButton = document.createElement('button');
    copyButton.type = 'button';
    copyButton.id = 'copy-all';
    copyButton.textContent = 'Copy all links';
    var copied = document.createElement('span');
    copied.className = 'copied';
    copyButton.addEventListener('click', function () {
      var urls = readyUrls(items);
      if (!urls.length) {
        copied.textContent = 'No link is ready yet.';
        announce(copied.textContent);
        return;
      }
      copyText(urls.join('\n'), copyButton).then(function (ok) {
        var said = ok
          ? 'Copied ' + urls.length + (urls.length === 1 ? ' link.' : ' links.')
          : 'Could not copy: select the links and copy them by hand.';
        copied.textContent = said;
        announce(said);
      });
    });
    actions.appendChild(copyButton);
    actions.appendChild(copied);
    box.appendChild(actions);
    sayAllowance(Array.isArray(data.allowance) ? data.allowance.map(function (a) {
      return a && typeof a.words === 'string' ? a.words : '';
    }).filter(Boolean) : []);

    function retitle() {
      var ready = 0;
      for (var k = 0; k < items.length; k++) {
        if (items[k].entry.state === 'ready') {
          ready++;
        }
      }
      title.textContent = ready + ' of ' + items.length + ' links ready';
      return ready;
    }
    var ready = retitle();
    var waiting = items.filter(function (it) {
      return it.entry.state !== 'ready' && it.entry.state !== 'pending';
    });
    if (waiting.length) {
      input.value = waiting.map(function (it) {
        return it.entry.link;
      }).join('\n');
    }
    announce(ready + ' of ' + items.length + ' links ready.' +
      (waiting.length ? ' The ' + waiting.length + ' not served are back in the box to send again.' : ''));
    setButton('idle');

    // Every wait counts down in its own item; the end of the last is said once.
    var counting = items.some(function (it) {
      return it.deadline > 0;
    });
    function tick() {
      var still = false;
      for (var k = 0; k < items.length; k++) {
        if (items[k].deadline > 0) {
          var left = Math.ceil((items[k].deadline - Date.now()) / 1000);
          var text = left > 0 ? 'You can try again in ' + waitWords(left) + '.' : 'You can try again now.';
          if (text !== items[k].said) {
            items[k].said = text;
            items[k].countdown.textContent = text;
          }
          still = still || left > 0;
        }
      }
      if (!still && listTicker) {
        clearInterval(listTicker);
        listTicker = 0;
        announce('You can send the links not served again now.');
      }
    }
    if (counting) {
      tick();
      listTicker = setInterval(tick, 250);
    }
    // A link under way is asked again on its own, after its own wait.
    items.forEach(function (it) {
      if (it.entry.state === 'pending') {
        pollItem(it, retitle);
      }
    });
  }

  // As the program's own list page draws them (src/http/link_list.rs).
  var STATE_LOOKS = {
    ready: 'ok',
    pending: 'busy',
    refused: 'wait',
    failed: 'error',
    not_tried: 'wait'
  };

  var STATE_WORDS = {
    ready: 'Ready',
    pending: 'Being prepared',
    refused: 'Not served',
    failed: 'Failed',
    not_tried: 'Not tried'
  };

  function drawItem(item) {
    var e = item.entry;
    var li = item.li;
    clear(li);
    var state = typeof e.state === 'string' && STATE_WORDS[e.state] ? e.state : 'failed';
    li.className = STATE_LOOKS[state];
    li.setAttribute('data-state', state);
    var asked = addText(li, 'p', '');
    asked.className = 'asked';
    var word = addText(asked, 'span', STATE_WORDS[state] + ': ');
    word.className = 'state';
    addLinkText(asked, typeof e.link === 'string' ? e.link : '');
    item.deadline = 0;
    if (state === 'ready') {
      var files = Array.isArray(e.files) && e.files.length > 1 ? e.files : [e];
      for (var i = 0; i < files.length; i++) {
        var f = files[i] || {};
        var href = typeof f.download === 'string' ? httpUrl(f.download) : '';
        if (!href) {
          continue;
        }
        var line = document.createElement('p');
        line.className = 'link';
        var a = document.createElement('a');
        a.href = href;
        a.rel = 'noreferrer noopener';
        if (typeof f.filename === 'string' && f.filename) {
          a.textContent = f.filename;
        } else {
          addLinkText(a, href);
        }
        line.appendChild(a);
        li.appendChild(line);
      }
      return;
    }
    var detail = typeof e.detail === 'string' && e.detail.trim() ? e.detail.trim() : '';
    if (state === 'pending') {
      addText(li, 'p', detail || 'The download service is preparing this file.');
      addText(li, 'p', 'This page asks again by itself; nothing more is paid for it.').className = 'elapsed';
      return;
    }
    var wait = typeof e.retry_after === 'number' && isFinite(e.retry_after)
      ? Math.min(Math.max(Math.ceil(e.retry_after), 0), MAX_WAIT_SECONDS) : 0;
    if (wait > 0) {
      var lead = WAIT_LEADS[e.code] || (e.status === 429 ? WAIT_LEADS.rate_limited : 'Not served for now.');
      var line = addText(li, 'p', lead + ' ');
      item.countdown = addText(line, 'span', '');
      item.countdown.className = 'countdown';
      item.deadline = Date.now() + wait * 1000;
      item.said = '';
    } else {
      addText(li, 'p', detail || fallbackMessage(e.status || 0));
    }
  }

  function readyUrls(items) {
    var urls = [];
    for (var i = 0; i < items.length; i++) {
      var e = items[i].entry;
      if (e.state !== 'ready') {
        continue;
      }
      var files = Array.isArray(e.files) && e.files.length > 1 ? e.files : [e];
      for (var k = 0; k < files.length; k++) {
        var href = files[k] && typeof files[k].download === 'string' ? httpUrl(files[k].download) : '';
        if (href) {
          urls.push(href);
        }
      }
    }
    return urls;
  }

  // Asks the same link again after its wait (joining its job: nothing more is paid) and
  // redraws its item with the answer.
  function pollItem(item, retitle) {
    var e = item.entry;
    var seconds = typeof e.retry_after === 'number' && e.retry_after > 0 ? Math.min(e.retry_after, 300) : 5;
    var target = typeof e.poll === 'string' && e.poll.charAt(0) === '/' && e.poll.charAt(1) !== '/'
      ? e.poll
      : form.action + '?link=' + encodeURIComponent(e.link);
    listPolls.push(setTimeout(function () {
      var code = 0;
      fetch(target, {
        headers: { 'Accept': 'application/json' },
        cache: 'no-store',
        credentials: 'same-origin'
      })
        .then(function (response) {
          code = response.status;
          return response.text();
        })
        .then(function (text) {
          var data = parseJson(text) || {};
          var entry = { link: e.link, status: code, poll: e.poll };
          for (var key in data) {
            if (Object.prototype.hasOwnProperty.call(data, key)) {
              entry[key] = data[key];
            }
          }
          entry.state = code === 202 ? 'pending' : code >= 200 && code < 300 ? 'ready'
            : code >= 400 && code < 500 ? 'refused' : 'failed';
          item.entry = entry;
          drawItem(item);
          var ready = retitle();
          if (entry.state === 'pending') {
            pollItem(item, retitle);
          } else {
            announce((entry.state === 'ready' ? 'Ready: ' : 'Not served: ') + e.link + '. ' + ready + ' links ready.');
          }
        }, function () {
          pollItem(item, retitle);
        });
    }, seconds * 1000));
  }

  // ---- What is left of the allowance, and the supported hosts. ----

  var allowanceBox = document.getElementById('allowance');
  // The visitor's rules from ?hosts=1: each rule's unit, for the words of a single answer.
  var ruleUnits = {};

  function sayAllowance(sentences) {
    if (!allowanceBox || !sentences.length) {
      return;
    }
    allowanceBox.textContent = sentences.map(function (s) {
      return s.charAt(0).toUpperCase() + s.slice(1) + '.';
    }).join(' ');
    allowanceBox.hidden = false;
  }

  // "12 of 30 left this minute" from the RateLimit headers of a one-link answer.
  function allowanceFromHeaders(headers) {
    if (!headers || typeof headers.get !== 'function') {
      return [];
    }
    var policy = items(headers.get('RateLimit-Policy') || '');
    var state = items(headers.get('RateLimit') || '');
    var out = [];
    for (var name in state) {
      if (Object.prototype.hasOwnProperty.call(state, name) && policy[name] &&
          typeof state[name].r === 'number' && typeof policy[name].q === 'number') {
        var unit = ruleUnits[name] || 'requests';
        var left = state[name].r;
        var limit = policy[name].q;
        var window = windowWords(policy[name].w || 0);
        out.push(unit === 'bytes'
          ? bytesWords(left) + ' of ' + bytesWords(limit) + ' left ' + window
          : left + ' of ' + limit + ' left ' + window);
      }
    }
    return out;
  }

  function items(value) {
    var out = {};
    value.split(',').forEach(function (item) {
      var parts = item.trim().split(';');
      var name = (parts.shift() || '').trim().replace(/^"|"$/g, '');
      if (!name) {
        return;
      }
      var params = {};
      parts.forEach(function (p) {
        var kv = p.trim().split('=');
        if (kv.length === 2 && /^\d+$/.test(kv[1])) {
          params[kv[0]] = parseInt(kv[1], 10);
        }
      });
      out[name] = params;
    });
    return out;
  }

  // As the program says it (src/http/allowance.rs).
  function windowWords(secs) {
    switch (secs) {
      case 60: return 'this minute';
      case 3600: return 'this hour';
      case 86400: return 'today';
      case 604800: return 'this week';
    }
    if (secs % 86400 === 0) {
      return 'in any ' + secs / 86400 + ' days';
    }
    if (secs % 3600 === 0) {
      return 'in any ' + secs / 3600 + ' hours';
    }
    if (secs % 60 === 0) {
      return 'in any ' + secs / 60 + ' minutes';
    }
    return 'in any ' + secs + ' seconds';
  }

  function bytesWords(bytes) {
    var units = [[1e12, 'TB'], [1e9, 'GB'], [1e6, 'MB'], [1e3, 'kB']];
    for (var i = 0; i < units.length; i++) {
      if (bytes >= units[i][0]) {
        // To the nearest tenth: a limit counted in whole kibibytes reads as it was written.
        var tenths = Math.round(bytes / (units[i][0] / 10));
        return (tenths % 10 ? (tenths / 10).toFixed(1) : String(tenths / 10)) + ' ' + units[i][1];
      }
    }
    return bytes + ' bytes';
  }

  // The hosts the site supports, from the lists it keeps (?hosts=1 costs no call), searchable.
  function hosts() {
    var section = document.getElementById('hosts');
    var search = document.getElementById('host-search');
    var list = document.getElementById('host-list');
    var count = document.getElementById('host-count');
    fetch(form.action + '?hosts=1', {
      headers: { 'Accept': 'application/json' },
      credentials: 'same-origin'
    })
      .then(function (response) {
        return response.ok ? response.text() : '';
      })
      .then(function (text) {
        var data = parseJson(text) || {};
        if (Array.isArray(data.rules)) {
          data.rules.forEach(function (r) {
            if (r && typeof r.name === 'string') {
              ruleUnits[r.name] = r.unit;
            }
          });
        }
        var names = Array.isArray(data.hosts) ? data.hosts.filter(function (h) {
          return typeof h === 'string' && h;
        }) : [];
        if (!section || !search || !list || !count || !names.length) {
          return;
        }
        section.querySelector('summary').textContent = 'Supported file hosts (' + names.length + ')';
        function show() {
          var wanted = search.value.trim().toLowerCase();
          clear(list);
          var shown = 0;
          for (var i = 0; i < names.length; i++) {
            if (!wanted || names[i].toLowerCase().indexOf(wanted) !== -1) {
              addText(list, 'li', names[i]);
              shown++;
            }
          }
          count.textContent = wanted
            ? (shown === 0 ? 'No host matches “' + search.value.trim() + '”.'
              : shown + (shown === 1 ? ' host matches.' : ' hosts match.'))
            : names.length + ' hosts.';
        }
        search.addEventListener('input', show);
        show();
        section.hidden = false;
      }, function () {});
  }

  about();
  hosts();
})();
