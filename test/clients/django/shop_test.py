"""Django (blocks django/shop/models.py,
django/shop/migrations/0001_initial.py and, for Django REST framework,
django/shop/serializers.py), and why BigIntegerField is not enough.

The settings are made here; the database is the one DATABASE_URL names,
given to Django as PGHOST, PGPORT, PGUSER and PGDATABASE.
"""

import io
import os
import sys

import django
from django.conf import settings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from check import check, check_id, run, sql  # noqa: E402

settings.configure(
    INSTALLED_APPS=["shop"],
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ["PGHOST"],
        "PORT": os.environ["PGPORT"],
        "USER": os.environ["PGUSER"],
        "NAME": os.environ["PGDATABASE"],
    }},
    USE_TZ=True,
)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, models  # noqa: E402


def column(table):
    return sql("SELECT data_type, column_default, is_identity,"
               " pg_get_serial_sequence(%s, 'id') IS NULL"
               " FROM information_schema.columns"
               " WHERE table_name = %s AND column_name = 'id'", (table, table))


def body():
    try:
        call_command("makemigrations", "shop", "--check", "--dry-run", stdout=io.StringIO())
        current = True
    except SystemExit:
        current = False
    check("the migration matches the models (makemigrations --check)", current)
    call_command("migrate", "shop", verbosity=0)
    for table in ("shop_article", "shop_comment"):
        check("migrate makes %s.id a bigint DEFAULT idgen_snowflake(), no sequence or identity"
              % table, column(table) == [("bigint", "idgen_snowflake()", "NO", True)],
              column(table))
    fk = sql("SELECT data_type FROM information_schema.columns"
             " WHERE table_name = 'shop_comment' AND column_name = 'article_id'")
    check("the foreign key column is a bigint", fk == [("bigint",)], fk)

    from shop.models import Article, Comment

    article = Article.objects.create(title="first")
    check("objects.create gives the object its ID", type(article.pk) is int, article.pk)
    check_id("Django create", "shop_article", article.pk)
    comment = Comment.objects.create(article=article, body="hi")
    check_id("Django child", "shop_comment", comment.pk)
    check("the child row refers to its parent's ID",
          sql("SELECT article_id::text FROM shop_comment WHERE id = %s", (comment.pk,))
          == [(str(article.pk),)])
    more = Article.objects.bulk_create([Article(title="a"), Article(title="b")])
    ids = [article.pk] + [a.pk for a in more]
    check("bulk_create gives each object its ID, all distinct",
          all(type(i) is int for i in ids) and len(set(ids)) == 3, ids)
    for i in ids[1:]:
        check_id("Django bulk_create", "shop_article", i)
    check("a lookup by the ID finds the object",
          Article.objects.get(pk=ids[2]).title == "b")

    # JSON through Django REST framework (block django/shop/serializers.py).
    import json

    from rest_framework import serializers as drf
    from rest_framework.renderers import JSONRenderer

    from shop.serializers import ArticleSerializer, CommentSerializer

    doc = json.loads(JSONRenderer().render(ArticleSerializer(article).data))
    check("DRF: ArticleSerializer writes the ID as a string",
          doc == {"id": str(article.pk), "title": "first"}, doc)
    doc = json.loads(JSONRenderer().render(CommentSerializer(comment).data))
    check("DRF: CommentSerializer writes its ID and its parent's as strings",
          doc == {"id": str(comment.pk), "article": str(article.pk), "body": "hi"}, doc)
    incoming = CommentSerializer(data={"article": str(article.pk), "body": "from JSON"})
    valid = incoming.is_valid()
    check("DRF: a comment posted with the parent's ID as a string is valid", valid, incoming.errors)
    if valid:
        saved = incoming.save()
        check("DRF: and is stored under that parent", saved.article_id == article.pk,
              saved.article_id)

    class PlainSerializer(drf.ModelSerializer):
        class Meta:
            model = Article
            fields = ["id", "title"]

    raw = JSONRenderer().render(PlainSerializer(article).data).decode()
    check("DRF: a plain ModelSerializer writes the ID as a JSON number",
          raw.startswith('{"id":%d,' % article.pk), raw)

    # The field the obvious way: Django sends the key as NULL.
    class Plain(models.Model):
        id = models.BigIntegerField(primary_key=True)
        title = models.CharField(max_length=200)

        class Meta:
            app_label = "shop"

    with connection.schema_editor() as editor:
        editor.create_model(Plain)
        editor.execute("ALTER TABLE shop_plain ALTER COLUMN id SET DEFAULT idgen_snowflake()")
    try:
        Plain.objects.create(title="x")
        error = None
    except IntegrityError as e:
        error = e.__cause__.pgcode if e.__cause__ is not None else "no cause"
    check("BigIntegerField(primary_key=True) with the same default: the INSERT fails (23502)",
          error == "23502", error)


run("Django", body)
