// Sends the link form without leaving the page and shows the answer of cgi-bin/resolve.
// Without this script the form still works: the server answers a page of its own.
(function () {
  'use strict';

  var form = document.getElementById('resolve-form');
  var input = document.getElementById('link');
  var button = document.getElementById('submit');
  var result = document.getElementById('result');
  if (!form || !input || !button || !result || !window.fetch || !window.URLSearchParams) {
    return;
  }

  var IDLE_LABEL = button.textContent;
  var BUSY_LABEL = 'Working…';
  var REQUEST_TIMEOUT_MS = 60000;
  var MAX_WAIT_SECONDS = 86400;

  var busy = false;
  var countdownTimer = 0;

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (busy || countdownTimer) {
      return;
    }
    send(input.value.trim());
  });

  function send(link) {
    busy = true;
    setButton(true, BUSY_LABEL);
    form.setAttribute('aria-busy', 'true');
    clear(result);

    var controller = typeof AbortController === 'function' ? new AbortController() : null;
    var timedOut = false;
    var timeout = setTimeout(function () {
      timedOut = true;
      if (controller) {
        controller.abort();
      }
    }, REQUEST_TIMEOUT_MS);

    var status = 0;
    var headers = null;
    fetch(form.action, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        'Accept': 'application/json'
      },
      body: new URLSearchParams({ link: link }).toString(),
      cache: 'no-store',
      credentials: 'same-origin',
      signal: controller ? controller.signal : undefined
    })
      .then(function (response) {
        status = response.status;
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
        done();
        if (outcome.ok) {
          handle(status, headers, parseJson(outcome.text));
        } else if (timedOut) {
          showError('The server took too long to answer. Please try again.');
        } else if (status) {
          showError(fallbackMessage(status));
        } else {
          showError('Could not reach the server. Check your internet connection and try again.');
        }
      });
  }

  function done() {
    busy = false;
    form.removeAttribute('aria-busy');
  }

  function handle(status, headers, data) {
    if (status >= 200 && status < 300) {
      if (data && typeof data.download === 'string' && data.download) {
        showDownload(data.download, typeof data.filename === 'string' ? data.filename : '');
      } else {
        showError('The server answered without a download link. Please try again.');
      }
      return;
    }

    var message = data && typeof data.detail === 'string' && data.detail.trim()
      ? data.detail.trim()
      : fallbackMessage(status);
    var wait = retryAfterSeconds(data, headers);
    if (wait > 0) {
      showWait(message, wait, status === 429 ? 'wait' : 'error');
    } else {
      showError(message);
    }
  }

  function showDownload(download, filename) {
    var href = httpUrl(download);
    if (!href) {
      var bad = card('error');
      addText(bad, 'p', 'The server answered an address that is not a web link, so it is not shown as a link:');
      addText(bad, 'p', download).className = 'url';
      setButton(false);
      return;
    }

    var box = card('ok');
    addText(box, 'p', 'Your download link is ready:').className = 'title';
    var line = document.createElement('p');
    var link = document.createElement('a');
    link.href = href;
    link.rel = 'noreferrer noopener';
    link.textContent = filename || href;
    line.appendChild(link);
    box.appendChild(line);
    if (filename) {
      addText(box, 'p', href).className = 'url';
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
        copied.textContent = ok ? 'Copied.' : 'Could not copy: select the link and copy it by hand.';
      });
    });
    actions.appendChild(copyButton);
    actions.appendChild(copied);
    box.appendChild(actions);
    setButton(false);
  }

  function showError(message) {
    addText(card('error'), 'p', message);
    setButton(false);
  }

  function showWait(message, seconds, kind) {
    var box = card(kind);
    addText(box, 'p', message).className = 'message';
    // The remaining time changes every second: it is shown, not read out each time.
    var line = document.createElement('p');
    line.setAttribute('aria-live', 'off');
    line.appendChild(document.createTextNode('Time left: '));
    var count = document.createElement('span');
    count.className = 'countdown';
    line.appendChild(count);
    box.appendChild(line);

    var deadline = Date.now() + seconds * 1000;
    function tick() {
      var left = Math.ceil((deadline - Date.now()) / 1000);
      if (left <= 0) {
        clearInterval(countdownTimer);
        countdownTimer = 0;
        box.removeChild(line);
        addText(box, 'p', 'You can try again now.');
        setButton(false);
        return;
      }
      count.textContent = left + (left === 1 ? ' second' : ' seconds');
      setButton(true, 'Wait ' + left + ' s');
    }
    countdownTimer = setInterval(tick, 250);
    tick();
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

  function fallbackMessage(status) {
    switch (status) {
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
    if (status >= 500) {
      return 'The server had a problem (error ' + status + '). Please try again later.';
    }
    return 'The request failed (error ' + status + '). Please try again.';
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

  function setButton(disabled, label) {
    button.disabled = disabled;
    button.textContent = disabled && label ? label : IDLE_LABEL;
  }

  function card(kind) {
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
})();
