/* SPDX-License-Identifier: MIT */
/*
 * Functions pyrsprof code must not call (git's banned.h): unbounded copies and formatting, and
 * non-reentrant calls. Include it last in every .c file.
 */
#ifndef PYRSPROF_BANNED_H
#define PYRSPROF_BANNED_H

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) BANNED(strncat)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef gets
#define gets(x) BANNED(gets)
#undef localtime
#define localtime(t) BANNED(localtime)

#endif
