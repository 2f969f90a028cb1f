"""`runserver` with the no-delay server class; everything else is staticfiles' runserver
(this app is listed before django.contrib.staticfiles so that this command is the one found)."""

from django.contrib.staticfiles.management.commands.runserver import Command as StaticRunserver

from portal.devserver.server import NoDelayWSGIServer


class Command(StaticRunserver):
    server_cls = NoDelayWSGIServer
