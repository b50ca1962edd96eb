#!/bin/bash
# Own everything by appsvc:web, then set each area's modes; finally strip any remaining o+w bit.
set -euo pipefail
cd /srv/app
chown -R appsvc:web /srv/app
chmod 0750 config && chmod 0640 config/* && chmod 0600 config/secret.key
chmod 0750 bin/*.sh
chmod 2775 uploads
find public -type d -exec chmod 0755 {} + && find public -type f -exec chmod 0644 {} +
chmod -R o-w /srv/app
